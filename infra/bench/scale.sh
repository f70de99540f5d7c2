#!/bin/bash
# The metastore's benches on the servers of a deployment at scale, all on loopback:
#   infra/bench/scale.sh metastore [ARGS...]  `lakefish bench metastore` with every lake on S3
#                                             (moto), ARGS passed on (e.g. --records 1000000)
#   infra/bench/scale.sh load [SECONDS] [CLIENTS]
#                                             `lakefish bench load` against `lakefish serve` on
#                                             Redis (queue) + PostgreSQL (metastore) + S3 (lake)
#                                             with two worker processes
# Uses target/release/lakefish (`cargo build --release --bin lakefish`), redis-server, Debian's
# postgresql and the project's .venv (moto_server); `make setup` installs them. Everything it
# starts lives in a temp directory and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
LF=${LAKEFISH:-$PWD/target/release/lakefish}
[ -x "$LF" ] || { echo "$LF missing: cargo build --release --bin lakefish" >&2; exit 1; }
WORK=$(mktemp -d /tmp/lakefish-scale.XXXXXX)
chmod 755 "$WORK"
PIDS=()
PGBIN=""
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$PGBIN" ]; then pg_as "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true; fi
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
# PostgreSQL refuses to run as root: under root it runs as `postgres` (Debian's package makes it).
pg_as() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start_moto() {
  local port; port=$(free_port)
  .venv/bin/moto_server -H 127.0.0.1 -p "$port" >"$WORK/moto.log" 2>&1 &
  PIDS+=($!)
  wait_port "$port"
  curl -sf -X PUT "http://127.0.0.1:$port/bench" >/dev/null
  export AWS_ENDPOINT="http://127.0.0.1:$port" AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
    AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
}

start_redis() {
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no >"$WORK/redis.log" 2>&1 &
  PIDS+=($!)
  wait_port "$REDIS_PORT"
}

start_postgres() {
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  PG_PORT=$(free_port)
  mkdir -p "$WORK/pg" "$WORK/pgsock" "$WORK/pglog"
  if [ "$(id -u)" = 0 ]; then chown postgres "$WORK/pg" "$WORK/pgsock" "$WORK/pglog"; fi
  pg_as "$PGBIN/initdb" -D "$WORK/pg" -U lakefish --auth=trust >"$WORK/initdb.log"
  pg_as "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pglog/pg.log" -w \
    -o "-p $PG_PORT -h 127.0.0.1 -k $WORK/pgsock -c fsync=off" start >/dev/null
  pg_as "$PGBIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U lakefish lakefish
  export LAKEFISH_METASTORE="postgres://lakefish@127.0.0.1:$PG_PORT/lakefish"
}

case "${1:-}" in
  metastore)
    shift
    start_moto
    "$LF" bench metastore --store s3://bench/metastore "$@"
    ;;
  load)
    SECONDS_=${2:-30}
    CLIENTS=${3:-32}
    start_moto
    start_redis
    start_postgres
    LAKE=s3://bench/lake
    "$LF" --lake "$LAKE" serve --listen 127.0.0.1:0 --redis "redis://127.0.0.1:$REDIS_PORT" \
      --no-workers >"$WORK/serve.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1 200); do grep -q "listening" "$WORK/serve.log" && break; sleep 0.1; done
    API=$(grep -o 'http://127.0.0.1:[0-9]*' "$WORK/serve.log" | head -1)
    [ -n "$API" ] || { cat "$WORK/serve.log" >&2; exit 1; }
    for w in a b; do
      "$LF" --lake "$LAKE" worker --redis "redis://127.0.0.1:$REDIS_PORT" --name "w-$w" \
        --threads 1 >"$WORK/worker-$w.log" 2>&1 &
      PIDS+=($!)
    done
    "$LF" synth "$WORK/load.binpack" --games 200 --seed 1 >/dev/null
    "$LF" --lake "$LAKE" ingest binpack "$WORK/load.binpack" --dataset load >/dev/null
    "$LF" --lake "$LAKE" mask quiet --source binpack --dataset load --name quiet >/dev/null
    echo "deployment: $API, Redis :$REDIS_PORT, PostgreSQL :$PG_PORT, S3 $AWS_ENDPOINT ($LAKE)"
    "$LF" bench load --api "$API" --clients "$CLIENTS" --seconds "$SECONDS_" \
      --job '{"kind":"mask","spec":{"dataset":"load","source":"binpack","definition":{"name":"quiet"}}}'
    ;;
  *)
    sed -n '2,11p' "$0" >&2
    exit 2
    ;;
esac
