#!/usr/bin/env bash
# `make quality`: the quality run. From an empty lake, with nothing but this machine's cores,
# the `quality` pipeline of infra/quality.toml makes a net that beats the hand-written
# evaluation at equal time: self-play with the hand-written evaluation, quiet masks, shuffle,
# a SCReLU net, quantization, registration, and an SPRT on the clock against the
# hand-written evaluation; the net is promoted if it is accepted. Run it again (ROUNDS=N) and
# each round plays its self-play with the best net, warm-starts from it and must beat it on
# the clock to be promoted. Nothing else may run on the machine meanwhile: the SPRT plays on
# the clock, one game per core.
#
#   bash infra/quality.sh              # one round into ./quality-run (40 minutes to 3 hours on 2 cores)
#   ROUNDS=3 bash infra/quality.sh     # three rounds, each against the best net so far
#   QUALITY_RUN=dir bash infra/quality.sh   # another directory (an existing lake goes on)
#   QUICK=1 bash infra/quality.sh      # the quick scale into ./quality-quick-run (under 45 minutes)
#   LAKEFISH__PIPELINES__QUALITY__DATAGEN__GAMES=60 ... # any value of quality.toml, for a short try
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/lakefish
if [ "${QUICK:-0}" = 1 ]; then
  # The quick scale (docs/BENCHMARKS.md "The quick quality run" has its measured run): the
  # same recipe on less data and a shorter clock. 40,000 self-play games at 2000 nodes a move
  # (about 3 M positions) and an SPRT at 4+0.04 with bounds [0, 100], at most 100 pairs.
  # A value already in the environment wins, as for the full run.
  export LAKEFISH__PIPELINES__QUALITY__DATAGEN__GAMES=${LAKEFISH__PIPELINES__QUALITY__DATAGEN__GAMES:-40000}
  export LAKEFISH__PIPELINES__QUALITY__DATAGEN__NODES=${LAKEFISH__PIPELINES__QUALITY__DATAGEN__NODES:-2000}
  export LAKEFISH__PIPELINES__QUALITY__SPRT__TC=${LAKEFISH__PIPELINES__QUALITY__SPRT__TC:-4+0.04}
  export LAKEFISH__PIPELINES__QUALITY__SPRT__ELO1=${LAKEFISH__PIPELINES__QUALITY__SPRT__ELO1:-100}
  export LAKEFISH__PIPELINES__QUALITY__SPRT__MAX_PAIRS=${LAKEFISH__PIPELINES__QUALITY__SPRT__MAX_PAIRS:-100}
  RUN=${QUALITY_RUN:-quality-quick-run}
else
  RUN=${QUALITY_RUN:-quality-run}
fi
ROUNDS=${ROUNDS:-1}
SHARED=../shared/data
mkdir -p "$RUN"
export LAKEFISH_LAKE="$RUN/lake"

BOOK="$RUN/noob_2moves.epd"
if [ -f "$SHARED/openings/noob_2moves.epd" ]; then
  cp "$SHARED/openings/noob_2moves.epd" "$BOOK"
else
  # Without the shared samples: four first moves (clock games differ from run to run).
  echo "no ../shared/data/openings/noob_2moves.epd: using a four-line book" >&2
  printf '%s\n' \
    'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq -' >"$BOOK"
fi
"$BIN" --config infra/quality.toml upload --source books "$BOOK" >/dev/null

"$BIN" --config infra/quality.toml serve --listen 127.0.0.1:0 --queue-db "$RUN/queue.sqlite" >"$RUN/serve.out" 2>>"$RUN/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$RUN/serve.out" 2>/dev/null && break; sleep 0.1; done
API=$(sed -n 's/^listening on //p' "$RUN/serve.out")
[ -n "$API" ] || { cat "$RUN/serve.log"; echo "the server did not start" >&2; exit 1; }
echo "lakefish API at $API (lake: $RUN/lake, log: $RUN/serve.log)"

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS"
  start=$(date +%s)
  "$BIN" --config infra/quality.toml pipeline --api "$API" run quality --wait
  echo "round $round took $(( $(date +%s) - start )) s"
done
"$BIN" --config infra/quality.toml nets ls
