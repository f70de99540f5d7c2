#!/usr/bin/env bash
# `make demo`: start `lakefish serve` on the embedded default (SQLite queue + local lake),
# submit a binpack ingest over REST, follow it to the end, then read the lake with DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=target/release/lakefish
RUN=demo-run
rm -rf "$RUN" && mkdir -p "$RUN"

INPUT=../shared/data/binpack/small.binpack
if [ ! -f "$INPUT" ]; then
  INPUT="$RUN/synthetic.binpack"
  "$BIN" synth "$INPUT" --games 3000 --seed 1
fi

"$BIN" --lake "$RUN/lake" serve --listen 127.0.0.1:0 --queue-db "$RUN/queue.sqlite" >"$RUN/serve.out" 2>"$RUN/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$RUN/serve.out" 2>/dev/null && break; sleep 0.1; done
API=$(sed -n 's/^listening on //p' "$RUN/serve.out")
[ -n "$API" ] || { cat "$RUN/serve.log"; echo "the server did not start" >&2; exit 1; }
echo "lakefish API at $API (lake: $RUN/lake, log: $RUN/serve.log)"

"$BIN" submit --api "$API" --wait ingest binpack "$INPUT" --dataset demo >"$RUN/job.json"
echo "job record: $RUN/job.json"
"$BIN" submit --api "$API" --wait mask quiet --dataset demo >"$RUN/mask.json"
echo "quiet mask: $RUN/mask.json"
"$BIN" submit --api "$API" --wait shuffle --dataset demo --mask quiet --chunks 8 --seed 1 >"$RUN/shuffle.json"
echo "shuffle: $RUN/shuffle.json"
echo "datasets (GET $API/v1/datasets):"
.venv/bin/python -c 'import json,sys,urllib.request; print(json.dumps(json.load(urllib.request.urlopen(sys.argv[1] + "/v1/datasets")), indent=2))' "$API"

.venv/bin/python - "$RUN/lake" <<'PY'
import sys, duckdb
lake = sys.argv[1]
q = f"select source, dataset, count(*) as rows, count(score) as scored, round(avg(ply), 1) as avg_ply, count(distinct game_id) as games from read_parquet('{lake}/positions/*/*/*.parquet', hive_partitioning=true) group by all"
print("DuckDB reads the lake:")
print(duckdb.sql(q))
PY
.venv/bin/python -c 'import json,sys; r=json.load(open(sys.argv[1])); print("shuffle", r["id"], ":", r["rows"], "quiet rows of", r["input_rows"], "in", len(r["chunks"]), "chunks")' "$RUN/shuffle.json"
echo "demo finished: ingest, mask and shuffle ran through REST -> SQLite queue -> worker -> Parquet lake"
