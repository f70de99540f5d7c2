#!/bin/bash
# Issue 42's measurements: each training recipe against today's per-epoch decay, trained on the
# same self-play shuffle, quantized, registered and played on the clock (8+0.08, SPRT [0, 30],
# at most 300 games). Run it again and it continues: a net registered before is used again
# (recorded in ../recipes/register-NAME.json beside the lake) and a test resumes from its
# stored batches.
#
#   LF=target/release/lakefish LAKE=/work/m42/lake SP=demo-run/lake/raw/selfplay/X.binpack \
#     bash infra/bench/recipes.sh [cosine|newbob|ranger|lambda|leaves|rescore ...]
set -euo pipefail
LF=${LF:-target/release/lakefish}
LAKE=${LAKE:?the lake to measure in}
SP=${SP:?a self-play binpack (make demo writes one under demo-run/lake/raw/selfplay/)}
BOOK=${BOOK:-../shared/data/openings/noob_2moves.epd}
L="$LF --lake $LAKE"
jsonf() { python3 -c "import sys,json; t=sys.stdin.read(); print(json.loads(t[t.index('{'):])$1)"; }
out=$LAKE/../recipes; mkdir -p "$out"
$L ingest binpack "$SP" --dataset sp > "$out/ingest.json"
$L mask quiet --dataset sp > /dev/null
SH=$($L shuffle --dataset sp --mask quiet --chunks 8 --seed 1 | jsonf "['id']")
base="--features all768 --arch 256x2:screlu --batch-size 8192 --epochs 8 --mirror --seed 1 --threads 2 --device cpu"
filt="--filter-min-ply 16 --filter-max-abs-score 3000"
decay="--lr 0.002 --lr-decay 0.7 --lambda-start 1 --lambda-end 1"
train() { # name, shuffle, flags...
  # Already trained and registered: the same net (a new run would name its file anew: the
  # run is in the file's comment, so a test against it would start over instead of resuming).
  if [ -s "$out/register-$1.json" ]; then jsonf "['name']" < "$out/register-$1.json"; return; fi
  local o; o=$($L train --shuffle "$2" $base "${@:3}"); echo "$o" > "$out/train-$1.json"
  local run; run=$(echo "$o" | jsonf "['id']")
  $L quantize --run "$run" --max-mean-cp 8 --max-p99-cp 40 > "$out/quantize-$1.json"
  $L register --run "$run" | tee "$out/register-$1.json" | jsonf "['name']"
}
sprt() { # label, new, base; exit codes 3 (rejected) and 4 (inconclusive) are findings too
  local rc=0
  $L sprt --new "$2" --base "$3" --book "$BOOK" --tc 8+0.08 --elo0 0 --elo1 30 --model logistic \
    --batch-pairs 1 --max-pairs 150 --threads 2 --seed 42 | tee "$out/sprt-$1.json" || rc=$?
  case $rc in 0|3|4) ;; *) exit "$rc" ;; esac
}
A=$(train decay "$SH" $filt $decay)
for m in "${@:-cosine newbob ranger lambda leaves rescore}"; do for m in $m; do case $m in
  cosine) N=$(train cosine "$SH" $filt --lambda-start 1 --lambda-end 1 --lr-schedule \
      '{"kind":"warmup","steps":100,"then":{"kind":"cosine","start":0.002,"end":0.000165}}') ;;
  newbob) N=$(train newbob "$SH" $filt $decay --plateau '{"factor":0.5,"patience":1,"threshold":0.001}') ;;
  ranger) N=$(train ranger "$SH" $filt $decay --optimizer ranger) ;;
  lambda) N=$(train lambda-half "$SH" $filt --lr 0.002 --lr-decay 0.7 --lambda-start 0.5 --lambda-end 0.5) ;;
  leaves)
    $L transform qsearch-leaf --dataset sp --output sp-leaves > "$out/leaves.json"
    $L mask all --dataset sp-leaves > /dev/null
    SHL=$($L shuffle --dataset sp-leaves --mask all --chunks 8 --seed 1 | jsonf "['id']")
    # Leaves are quiet by construction: the same ply and score limits without the quiet rule.
    N=$(train leaves "$SHL" --filter-rule early-skip=15 --filter-max-abs-score 3000 $decay) ;;
  rescore)
    $L engines add stockfish --command /usr/games/stockfish --option Threads=1 --option Hash=16 --no-check || true
    $L transform rescore --dataset sp --output sp-sf --engine stockfish --nodes 5000 > "$out/rescore.json"
    $L mask quiet --dataset sp-sf > /dev/null
    SHR=$($L shuffle --dataset sp-sf --mask quiet --chunks 8 --seed 1 | jsonf "['id']")
    N=$(train rescored "$SHR" $filt $decay) ;;
  *) echo "unknown measurement $m" >&2; exit 2 ;;
esac; sprt "$m" "$N" "$A"; done; done
