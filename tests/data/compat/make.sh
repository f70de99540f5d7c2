#!/usr/bin/env bash
# Makes the compatibility fixture (issue 36): a small lake, its SQLite metastore and a SQLite
# queue holding one queued job, written by the lakefish given as $1 (the release before a
# change). tests/tests/compat.rs checks that the code after the change reads, serves, runs and
# trains on it. Re-made only on purpose: the point is that it was written by an older release.
#   bash tests/data/compat/make.sh target/debug/lakefish
set -euo pipefail
BIN=$(realpath "$1")
OUT=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export LAKEFISH_LAKE=lake
"$BIN" synth games.binpack --games 40 --seed 36
"$BIN" ingest binpack games.binpack --dataset compat
"$BIN" mask quiet --dataset compat
"$BIN" shuffle --dataset compat --chunks 3 --seed 1
SH=$(ls lake/shuffled)
"$BIN" train --shuffle "$SH" --arch 32x2-8-8 --batch-size 256 --epochs 1 --checkpoint-every 5 --seed 1
RUN=$(ls lake/runs)
"$BIN" quantize --run "$RUN" --max-mean-cp 100 --max-p99-cp 400
"$BIN" register --run "$RUN"
NET=$(ls lake/nets | grep '\.nnue$')
printf '%s\n' 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -' \
  'rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -' >book.epd
"$BIN" sprt --new "$NET" --base classical --book book.epd --nodes 200 --max-pairs 2 --batch-pairs 1 || [ $? -ge 3 ]
# One job left queued: the worker is busy with self-play when the mask job comes, and a
# SIGTERM lets it finish the game it plays but start nothing more.
"$BIN" serve --listen 127.0.0.1:0 --queue-db queue.sqlite --no-scheduler >serve.out 2>serve.log &
PID=$!
for _ in $(seq 100); do grep -q '^listening on' serve.out 2>/dev/null && break; sleep 0.1; done
API=$(sed -n 's/^listening on //p' serve.out)
[ -n "$API" ] || { cat serve.log; exit 1; }
curl -sf -X POST -H 'content-type: application/json' "$API/v1/jobs" \
  -d '{"kind":"datagen","spec":{"net":"classical","games":6,"nodes":300,"dataset":"play","seed":1}}' >datagen.json
sleep 1
curl -sf -X POST -H 'content-type: application/json' "$API/v1/jobs" \
  -d '{"kind":"mask","spec":{"dataset":"compat","definition":{"name":"ply8","min_ply":8}}}' >queued.json
kill -TERM $PID; wait $PID || true
curl -sf "$API/healthz" && { echo "the server did not stop"; exit 1; }
rm -rf "$OUT/lake" "$OUT"/*.sqlite
cp -r lake "$OUT/lake"
# Each database in one file (they run in WAL mode): what the release left, checkpointed.
for db in lakefish-meta.sqlite queue.sqlite; do
  python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("vacuum into ?", (sys.argv[2],))' "$db" "$OUT/$db"
done
cp queued.json "$OUT/"
"$BIN" --version >"$OUT/VERSION"
git -C "$OUT" rev-parse HEAD >>"$OUT/VERSION"
echo "fixture written to $OUT: $(du -sh "$OUT" | cut -f1)"
