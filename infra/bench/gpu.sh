#!/usr/bin/env bash
# The trainer's GPU checks, for a machine with an NVIDIA GPU and torch 2.11 (+cu130) in a
# Python (the build machine needs neither: copy a release `lakefish` there).
#
#   LAKEFISH=path/to/lakefish PY=/path/to/python infra/bench/gpu.sh BINPACK [DEVICE] [STEPS]
#
# 1. `lakefish bench train --device DEVICE`: loader alone, training steps on the device, and
#    the plain PyTorch loop (infra/bench/torch_reference.py) on the same batches and device.
# 2. Exact resume on the device: 60 steps straight and 30 + resume 30 must leave checkpoints
#    with the same sha256; then the device run goes on for 30 more steps on the CPU.
# 3. A whole training run (2 epochs, batch 16384) on BINPACK's quiet rows, with its rates.
# Results go to $OUT (default /tmp/gpu-out).
set -euo pipefail
BINPACK=${1:?usage: gpu.sh BINPACK [cuda|cpu|auto] [STEPS]}
DEV=${2:-cuda}
STEPS=${3:-300}
LF=${LAKEFISH:-target/release/lakefish}
PY=${PY:-$(command -v python3)}
OUTD=${OUT:-/tmp/gpu-out}
mkdir -p "$OUTD"
# The binary's rpath names the build machine's libtorch; here it is the Python's torch.
torch_dir=$("$PY" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")' 2>/dev/null || true)
[ -n "$torch_dir" ] || { echo "gpu.sh: no torch in $PY (set PY to a Python with torch 2.11)" >&2; exit 1; }
export LD_LIBRARY_PATH=$torch_dir/lib:$torch_dir/../nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
script=$(dirname "$0")/torch_reference.py

if "$PY" -c 'import torch, numpy' 2>/dev/null; then
  reference=(--torch-python "$PY" --torch-script "$script")
else
  echo "torch and numpy do not import in $PY: the PyTorch reference is skipped"
  reference=(--torch-python /nonexistent)
fi
"$LF" bench train "$BINPACK" --device "$DEV" --steps "$STEPS" "${reference[@]}" 2>&1 | tee "$OUTD/bench.txt"

lake=$(mktemp -d)
trap 'rm -rf "$lake"' EXIT
"$LF" --lake "$lake" ingest binpack "$BINPACK" --dataset d >/dev/null
"$LF" --lake "$lake" mask quiet --dataset d >/dev/null
sh=$("$LF" --lake "$lake" shuffle --dataset d --chunks 8 --seed 1 2>&1 | grep -o 'sh-[0-9a-f]\{12\}' | head -1)
# Prints the run id; the whole output goes to $OUTD/train.log (a failure stops the script).
train() {
  "$LF" --lake "$lake" train --shuffle "$sh" --batch-size 4096 --val-chunks 1 --seed 3 --epochs 4 "$@" \
    >> "$OUTD/train.log" 2>&1 || { tail -5 "$OUTD/train.log" >&2; exit 1; }
  tail -50 "$OUTD/train.log" | grep -o 'run-[0-9a-f]\{12\}' | tail -1
}
a=$(train --device "$DEV" --max-steps 60)
b=$(train --device "$DEV" --max-steps 30)
train --device "$DEV" --max-steps 60 --resume "$b" >/dev/null
sa=$(sha256sum < "$lake/runs/$a/checkpoints/step-000000060.ot")
sb=$(sha256sum < "$lake/runs/$b/checkpoints/step-000000060.ot")
echo "60 steps: $sa; 30 + resume 30: $sb" | tee "$OUTD/resume.txt"
if [ "$sa" = "$sb" ]; then
  echo "exact resume on $DEV: yes" | tee -a "$OUTD/resume.txt"
else
  echo "exact resume on $DEV: NO" | tee -a "$OUTD/resume.txt"
  exit 1
fi
train --device cpu --max-steps 90 --resume "$b" >/dev/null
ls "$lake/runs/$b/checkpoints" | tee -a "$OUTD/resume.txt"

sh=$("$LF" --lake "$lake" shuffle --dataset d --chunks 16 --seed 2 2>&1 | grep -o 'sh-[0-9a-f]\{12\}' | head -1)
start=$(date +%s.%N)
run=$("$LF" --lake "$lake" train --shuffle "$sh" --device "$DEV" --epochs 2 --val-chunks 1 2>>"$OUTD/train.log" |
  grep -o 'run-[0-9a-f]\{12\}' | head -1)
end=$(date +%s.%N)
"$LF" --lake "$lake" runs "$run" > "$OUTD/run.json"
echo "whole run $run: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s" | tee "$OUTD/train.txt"
grep -o '"positions_per_s": [0-9.]*' "$OUTD/run.json" | awk '{print $2}' | sort -n |
  awk '{v[NR]=$1} END {print "positions/s per 10-step window: min " v[1] ", median " v[int((NR+1)/2)] ", max " v[NR]}' |
  tee -a "$OUTD/train.txt"
