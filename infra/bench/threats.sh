#!/bin/bash
# Issue 43's measurement: a threats + HalfKAv2_hm net against the same shape without threats
# (infra/nets/threats-halfka-256.toml, halfka-256.toml), trained on the same shuffle within
# the same budget (8 epochs, batch 8,192, seed 1), quantized, registered and played on the
# clock (8+0.08, SPRT [0, 50], at most 400 games). Resumable: a net registered before is used
# again (../threats/register-NAME.json beside the lake) and a test resumes from its stored
# batches.
#
#   LF=target/release/lakefish LAKE=/work/m42/lake SH=sh-285d5a3adcb8 bash infra/bench/threats.sh
set -euo pipefail
LF=${LF:-target/release/lakefish}
LAKE=${LAKE:?the lake to measure in}
SH=${SH:?a committed shuffle of the lake}
BOOK=${BOOK:-../shared/data/openings/noob_2moves.epd}
L="$LF --lake $LAKE"
jsonf() { python3 -c "import sys,json; t=sys.stdin.read(); print(json.loads(t[t.index('{'):])$1)"; }
out=$LAKE/../threats; mkdir -p "$out"
train() { # name, NetSpec file
  # Already trained and registered: the same net (a new run would name its file anew: the
  # run is in the file's comment, so a test against it would start over instead of resuming).
  if [ -s "$out/register-$1.json" ]; then jsonf "['name']" < "$out/register-$1.json"; return; fi
  local o; o=$($L train --shuffle "$SH" --net-spec "$2" --batch-size 8192 --epochs 8 --mirror \
    --lr 0.002 --lr-decay 0.7 --lambda-start 1 --lambda-end 1 --filter-min-ply 16 \
    --filter-max-abs-score 3000 --seed 1 --threads 2 --device cpu)
  echo "$o" > "$out/train-$1.json"
  local run; run=$(echo "$o" | jsonf "['id']")
  $L quantize --run "$run" --max-mean-cp 8 --max-p99-cp 40 > "$out/quantize-$1.json"
  $L register --run "$run" | tee "$out/register-$1.json" | jsonf "['name']"
}
A=$(train halfka infra/nets/halfka-256.toml)
T=$(train threats infra/nets/threats-halfka-256.toml)
for n in halfka-256 threats-halfka-256; do
  $LF engine bench --random-net infra/nets/$n.toml --depth 4 | tail -1 | sed "s/^/$n: /"
done | tee "$out/nodes.txt"
# Exit codes 3 (rejected) and 4 (inconclusive) are findings too.
rc=0
$L sprt --new "$T" --base "$A" --book "$BOOK" --tc 8+0.08 --elo0 0 --elo1 50 --model logistic \
  --batch-pairs 1 --max-pairs 200 --threads 2 --seed 43 | tee "$out/sprt.json" || rc=$?
case $rc in 0|3|4) ;; *) exit "$rc" ;; esac
