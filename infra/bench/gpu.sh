#!/usr/bin/env bash
# The trainer's GPU checks, for a machine with an NVIDIA GPU and torch 2.11 (+cu130) in a
# Python (the build machine needs neither: copy a release `lakefish` and `lakefish-bench`).
#
#   LAKEFISH=path/to/lakefish PY=/path/to/python infra/bench/gpu.sh BINPACK [DEVICE] [STEPS] [REPEAT]
#
# 1. `lakefish bench train --device DEVICE`: loader alone, training steps on the device, and
#    the plain PyTorch loop (infra/bench/torch_reference.py) on the same batches and device.
# 2. Exact resume on the device for all768 256x2:screlu, halfka_v2_hm 256x2-32-32, Stockfish
#    15.1's architecture and infra/nets/buckets-512.toml (a NetSpec with king buckets and
#    output buckets): 60 steps straight and 30 + resume 30 must leave
#    checkpoints with the same sha256; the first then goes on for 30 more steps on the CPU.
# 3. Whole runs at batch 16384 on BINPACK's quiet rows repeated REPEAT times (default 32):
#    all768 256x2:screlu and stockfish-15.1, each for up to WHOLE_S seconds (default 75),
#    with their 10-step windows' rates (the first, with start-up, apart) and where the time
#    went (waiting for the loader, moving batches to the device, queueing steps, reading the
#    loss back: the "training finished" log line).
# 4. The input families of issue 43 (King-All, threats beside piece-square and HalfKAv2_hm,
#    axes, mobility, pairwise axes) as 128-wide NetSpecs: exact resume on DEVICE, the same
#    30 steps on DEVICE and on the CPU with the dense update (their 10-step losses within 1e-3 of each other), and
#    the DEVICE run quantized (checked against the float model).
#    WHOLE may also name threats-halfka-256 and halfka-256 (infra/nets/).
# Each part reports and goes on when another fails; the exit status is the number of failed
# parts. Results go to $OUT (default /tmp/gpu-out).
set -uo pipefail
BINPACK=${1:?usage: gpu.sh BINPACK [cuda|cpu|auto] [STEPS] [REPEAT]}
DEV=${2:-cuda}
STEPS=${3:-300}
REPEAT=${4:-32}
WHOLE_S=${WHOLE_S:-75}
LF=${LAKEFISH:-target/release/lakefish}
PY=$(command -v "${PY:-python3}" || echo "${PY:-python3}")
# Parts to run (PARTS="1 3" skips the resume checks); whole runs listed in WHOLE (default: all).
PARTS=${PARTS:-1 2 3}
WHOLE=${WHOLE:-all768-256x2-screlu stockfish-15.1 all768-256x2-32-32 buckets-512}
OUTD=${OUT:-/tmp/gpu-out}
mkdir -p "$OUTD"
failed=0
part() { echo; echo "== $* ($(date -u +%T))" | tee -a "$OUTD/summary.txt"; }
fail() { echo "FAILED: $*" | tee -a "$OUTD/summary.txt"; failed=$((failed + 1)); }
say() { echo "$*" | tee -a "$OUTD/summary.txt"; }

# The binary's rpath names the build machine's libtorch; here it is the Python's torch.
torch_dir=$("$PY" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null || true)
[ -n "$torch_dir" ] || { echo "gpu.sh: no torch in $PY (set PY to a Python with torch 2.11)" >&2; exit 1; }
export LD_LIBRARY_PATH=$torch_dir/lib:$torch_dir/../nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
script=$(dirname "$0")/torch_reference.py
NETS=$(dirname "$0")/../nets
say "machine: $(nvidia-smi -L 2>/dev/null | head -1 || echo 'no nvidia-smi'); $(nproc) cores; torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"

want() { [[ " $PARTS " == *" $1 "* ]]; }
if want 1; then
part "1. bench train --device $DEV --steps $STEPS"
if "$PY" -c 'import torch, numpy' 2>/dev/null; then
  reference=(--torch-python "$PY" --torch-script "$script")
else
  say "torch and numpy do not import in $PY: the PyTorch reference is skipped"
  reference=(--torch-python /nonexistent)
fi
timeout 240 "$LF" bench train "$BINPACK" --device "$DEV" --steps "$STEPS" \
  --features "${BENCH_FEATURES:-all768,halfka_v2_hm}" "${reference[@]}" > "$OUTD/bench.txt" 2>&1 ||
  fail "bench train (exit $?): $(tail -3 "$OUTD/bench.txt")"
grep -vE '^\s*$|INFO|WARN|Memory.cpp' "$OUTD/bench.txt" | tail -30 | tee -a "$OUTD/summary.txt"
fi

lake=$(mktemp -d)
trap 'rm -rf "$lake"' EXIT
shuffle_of() { grep -o 'sh-[0-9a-f]\{12\}' | head -1; }
# Trains on shuffle $1 with the rest as flags; prints the run id, logs to train.log.
train() {
  local sh=$1
  shift
  "$LF" --lake "$lake" train --shuffle "$sh" --val-chunks 1 --seed 3 "$@" >> "$OUTD/train.log" 2>&1 ||
    { echo "train $* failed: $(tail -3 "$OUTD/train.log")" >&2; return 1; }
  # The run record printed last: its "id" (a described net's record is long).
  grep -o '"id": "run-[0-9a-f]\{12\}"' "$OUTD/train.log" | tail -1 | grep -o 'run-[0-9a-f]\{12\}'
}

"$LF" --lake "$lake" ingest binpack "$BINPACK" --dataset d > /dev/null 2>&1 &&
  "$LF" --lake "$lake" mask quiet --dataset d > /dev/null 2>&1 || fail "ingest $BINPACK"
small=$("$LF" --lake "$lake" shuffle --dataset d --chunks 8 --seed 1 2>&1 | shuffle_of)
resume() {
  local label=$1
  shift
  local flags=(--device "$DEV" --batch-size 4096 --epochs 4 "$@")
  local a b sa sb
  a=$(train "$small" "${flags[@]}" --max-steps 60) || { fail "$label: 60 steps"; return; }
  b=$(train "$small" "${flags[@]}" --max-steps 30) || { fail "$label: 30 steps"; return; }
  train "$small" "${flags[@]}" --max-steps 60 --resume "$b" > /dev/null || { fail "$label: resume"; return; }
  sa=$(sha256sum < "$lake/runs/$a/checkpoints/step-000000060.ot" | cut -c1-16)
  sb=$(sha256sum < "$lake/runs/$b/checkpoints/step-000000060.ot" | cut -c1-16)
  if [ "$sa" = "$sb" ]; then
    say "$label: exact resume on $DEV: yes (60 steps and 30 + resume 30 both $sa…)"
  else
    fail "$label: exact resume on $DEV: NO (60 steps $sa…, 30 + resume 30 $sb…)"
  fi
  RESUMED=$b
}
if want 2; then
part "2. exact resume on $DEV"
resume "all768 256x2:screlu" --features all768 --arch 256x2:screlu
if [ -n "${RESUMED:-}" ]; then
  train "$small" --device cpu --batch-size 4096 --epochs 4 --features all768 --arch 256x2:screlu \
    --max-steps 90 --resume "$RESUMED" > /dev/null &&
    say "  and on the CPU from there: $(ls "$lake/runs/$RESUMED/checkpoints" | tr '\n' ' ')" ||
    fail "all768: going on on the CPU"
fi
RESUMED=
resume "halfka_v2_hm 256x2-32-32" --features halfka_v2_hm --arch 256x2-32-32
resume "stockfish-15.1" --features halfka_v2_hm --arch stockfish-15.1
resume "buckets-512 (a NetSpec: king and output buckets)" --net-spec "$NETS/buckets-512.toml"
fi

if want 4; then
part "4. the input families (issue 43) on $DEV: exact resume, and the CPU's losses"
fam=$lake/families
mkdir -p "$fam"
# Each family as a NetSpec under a 128-wide SCReLU transformer, alone or beside piece-square
# inputs (threats, axes, mobility and pairwise axes say nothing of an unattacked man alone).
spec() {
  local name=$1 inputs=$2
  printf 'version = 1\nname = "%s"\n\n%s\n\n[transformer]\nwidth = 128\nactivation = "screlu"\n\n[quantization]\neval_scale = 400.0\n' \
    "$name" "$inputs" > "$fam/$name.toml"
}
combined() { printf '[inputs]\nfamily = "combined"\n'; for f in "$@"; do printf '\n[[inputs.parts]]\nfamily = "%s"\n' "$f"; done; }
spec king-all "$(printf '[inputs]\nfamily = "king_buckets"\nlayout = [%s]' "$(seq -s ', ' 0 63)")"
spec threats-all "$(combined threats piece_square)"
spec threats-halfka "$(combined threats halfka_v2_hm)"
spec all-axes "$(combined piece_square axes)"
spec all-mobility "$(combined piece_square mobility)"
spec all-pairwise "$(combined piece_square pairwise_axes)"
# The training losses of a run's 10-step windows, space-separated.
losses() { "$LF" --lake "$lake" runs "$1" --metrics 2>/dev/null | grep -o '"train_loss": [0-9.eE+-]*' | cut -d' ' -f2 | tr '\n' ' '; }
for f in king-all threats-all threats-halfka all-axes all-mobility all-pairwise; do
  RESUMED=
  resume "$f" --net-spec "$fam/$f.toml"
  [ -n "${RESUMED:-}" ] || continue
  gpu_run=$(train "$small" --device "$DEV" --batch-size 4096 --epochs 4 --net-spec "$fam/$f.toml" --max-steps 30) &&
    cpu_run=$(train "$small" --device cpu --ft-update dense --batch-size 4096 --epochs 4 --net-spec "$fam/$f.toml" --max-steps 30) ||
    { fail "$f: 30 steps on $DEV and on the CPU"; continue; }
  a=$(losses "$gpu_run")
  b=$(losses "$cpu_run")
  # Same batches, same initial weights, the same dense Adam (the CPU's default, the sparse
  # update, is lazy Adam: another optimizer): the devices differ only in the order of sums.
  worst=$("$PY" -c 'import sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]; print(max(abs(x-y)/abs(y) for x,y in zip(a,b)) if a and len(a)==len(b) else "unequal")' "$a" "$b")
  say "  $DEV losses: $a"
  say "  cpu (dense) losses: $b (largest relative difference $worst)"
  "$PY" -c 'import sys; sys.exit(0 if sys.argv[1] != "unequal" and float(sys.argv[1]) < 1e-3 else 1)' "$worst" ||
    fail "$f: $DEV and CPU losses differ by $worst"
  "$LF" --lake "$lake" quantize --run "$gpu_run" > "$OUTD/quantize-$f.log" 2>&1 &&
    say "  quantized from $DEV: $(grep -oE '"(max|mean)_abs_cp": [0-9.]+' "$OUTD/quantize-$f.log" | head -2 | tr '\n' ' ')" ||
    fail "$f: quantize of the $DEV run: $(tail -2 "$OUTD/quantize-$f.log")"
done
fi

want 3 || { part "done: $failed part(s) failed"; exit "$failed"; }
part "3. whole runs, batch 16384, $BINPACK x$REPEAT"
big=$lake/big.binpack
for _ in $(seq "$REPEAT"); do cat "$BINPACK"; done > "$big"
t0=$(date +%s.%N)
"$LF" --lake "$lake" ingest binpack "$big" --dataset big > /dev/null 2>&1 &&
  "$LF" --lake "$lake" mask quiet --dataset big > /dev/null 2>&1 || fail "ingest x$REPEAT"
bigsh=$("$LF" --lake "$lake" shuffle --dataset big --chunks 32 --seed 2 2>&1 | shuffle_of)
say "ingest, mask and shuffle of x$REPEAT: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
whole() {
  local label=$1
  shift
  local start end run
  start=$(date +%s.%N)
  # Stopped after WHOLE_S seconds; checkpoints every 200 steps keep what it measured.
  timeout -s INT "$WHOLE_S" "$LF" --lake "$lake" train --shuffle "$bigsh" --device "$DEV" \
    --batch-size 16384 --val-chunks 1 --epochs 100 --checkpoint-every 200 "$@" \
    > "$OUTD/whole-$label.log" 2>&1
  end=$(date +%s.%N)
  run=$(grep -o 'run-[0-9a-f]\{12\}' "$OUTD/whole-$label.log" | head -1)
  [ -n "$run" ] || { fail "$label whole run: $(tail -3 "$OUTD/whole-$label.log")"; return; }
  "$LF" --lake "$lake" runs "$run" --metrics > "$OUTD/whole-$label.json" 2>/dev/null
  say "$label: $run, $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s wall"
  "$PY" - "$OUTD/whole-$label.json" <<'EOF' | tee -a "$OUTD/summary.txt"
import json, re, statistics, sys
text = open(sys.argv[1]).read()
rates = [float(x) for x in re.findall(r'"positions_per_s":\s*([0-9.eE+]+)', text)]
if len(rates) < 3:
    print(f"  only {len(rates)} windows recorded")
else:
    first, rest = rates[0], rates[1:]
    print(f"  {len(rates)} windows of 10 steps: first (start-up) {first/1e6:.2f} M/s; "
          f"the rest: median {statistics.median(rest)/1e6:.2f} M, mean {statistics.mean(rest)/1e6:.2f} M, "
          f"min {min(rest)/1e6:.2f} M, max {max(rest)/1e6:.2f} M positions/s")
EOF
  grep -hE "training finished|epoch finished" "$OUTD/whole-$label.log" | tail -1 | sed 's/^/  /' | tee -a "$OUTD/summary.txt"
}
for w in $WHOLE; do
  case $w in
    all768-256x2-screlu) whole "$w" --features all768 --arch 256x2:screlu ;;
    all768-256x2-32-32) whole "$w" --features all768 --arch 256x2-32-32 ;;
    stockfish-15.1) whole "$w" --features halfka_v2_hm --arch stockfish-15.1 ;;
    buckets-512) whole "$w" --net-spec "$NETS/buckets-512.toml" ;;
    threats-halfka-256) whole "$w" --net-spec "$NETS/threats-halfka-256.toml" ;;
    halfka-256) whole "$w" --net-spec "$NETS/halfka-256.toml" ;;
    *) fail "unknown whole run $w" ;;
  esac
done

part "done: $failed part(s) failed"
exit "$failed"
