#!/usr/bin/env bash
# `make demo`: the whole lifecycle on the embedded default. `lakefish serve` (local lake,
# SQLite queue, workers in-process) runs the `demo` pipeline of infra/demo.toml: self-play,
# ingest of the real samples in ../shared/data, quiet masks, shuffle, training, quantization,
# registration, an SPRT against the hand-written evaluation, and promotion if it is accepted.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/lakefish
RUN=demo-run
SHARED=../shared/data
rm -rf "$RUN" && mkdir -p "$RUN"
export LAKEFISH_LAKE="$RUN/lake"

# Raw inputs go into the lake where the pipeline looks for them (raw/binpack/, raw/lichess/).
if [ -f "$SHARED/binpack/small.binpack" ]; then
  "$BIN" upload --source binpack "$SHARED/binpack/small.binpack"
  [ -f "$SHARED/pgn/lichess_db_1000k.pgn" ] && "$BIN" upload --source lichess "$SHARED/pgn/lichess_db_1000k.pgn"
else
  "$BIN" synth "$RUN/synthetic.binpack" --games 3000 --seed 1
  "$BIN" upload --source binpack "$RUN/synthetic.binpack"
fi
BOOK="$RUN/openings.epd"
if [ -f "$SHARED/openings/noob_2moves.epd" ]; then
  cp "$SHARED/openings/noob_2moves.epd" "$BOOK"
else
  printf '%s\n' \
    'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq -' \
    'rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq -' >"$BOOK"
fi
"$BIN" upload --source books "$BOOK"

"$BIN" --config infra/demo.toml serve --listen 127.0.0.1:0 --queue-db "$RUN/queue.sqlite" >"$RUN/serve.out" 2>"$RUN/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$RUN/serve.out" 2>/dev/null && break; sleep 0.1; done
API=$(sed -n 's/^listening on //p' "$RUN/serve.out")
[ -n "$API" ] || { cat "$RUN/serve.log"; echo "the server did not start" >&2; exit 1; }
echo "lakefish API at $API (lake: $RUN/lake, log: $RUN/serve.log)"

"$BIN" pipeline --api "$API" run demo --wait

.venv/bin/python - "$RUN/lake" <<'PY'
import sys, glob, duckdb
lake = sys.argv[1]
# Lichess partitions have a month level the others lack: one read per layout.
reads = [f"select source, dataset, score, game_id from read_parquet('{g}', hive_partitioning=true)"
         for g in (f"{lake}/positions/source=*/dataset=*/*.parquet", f"{lake}/positions/source=*/dataset=*/month=*/*.parquet")
         if glob.glob(g)]
q = "select source, dataset, count(*) as rows, count(score) as scored, count(distinct game_id) as games from (" + " union all ".join(reads) + ") group by all order by all"
print("the lake, read by DuckDB:")
print(duckdb.sql(q))
PY
echo "dashboard: $API/   pipelines: $API/v1/pipelines   metrics: $API/metrics"
if [ -t 0 ] && [ -z "${CI:-}" ]; then
  read -r -p "The server keeps running for the dashboard; press Enter to stop it. " _ || true
else
  echo "To browse it later: $BIN --lake $RUN/lake serve --queue-db $RUN/queue.sqlite --listen 127.0.0.1:8080 (job records: $RUN/lakefish-meta.sqlite), then open http://127.0.0.1:8080/"
fi
