#!/usr/bin/env bash
# One-time, idempotent set-up of everything lakefish needs on a fresh Debian machine with Rust:
#   - redis-server (apt)            for the Redis queue and its tests
#   - chromium (apt)                headless browser for the dashboard test
#   - postgresql (apt)              the metastore's PostgreSQL backend; tests start their own
#                                   server in a temp dir (the package's own cluster is unused)
#   - stockfish (apt)               Stockfish 15.1, /usr/games/stockfish: a real UCI engine
#   - .venv with torch==2.11.0      libtorch for the trainer (tch 0.24), CPU-only and lean
#   - pyarrow, duckdb, moto[server] interop checks and an S3-compatible server for tests
#   - schemathesis                  fuzzes the API from its OpenAPI document in the tests
# Re-running it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

PY=${PYTHON:-python3}
apt_missing=()
command -v redis-server >/dev/null 2>&1 || apt_missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_missing+=(postgresql)
[ -x /usr/games/stockfish ] || apt_missing+=(stockfish)
# Debian's python3 needs python3-venv for `python3 -m venv` (pip bootstrap).
if [ ! -x .venv/bin/pip ] && ! "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
  apt_missing+=(python3-venv)
fi
if [ ${#apt_missing[@]} -gt 0 ]; then
  log "installing ${apt_missing[*]} (apt)"
  if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
  elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "setup: need root (or sudo) to apt-get install ${apt_missing[*]}" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/pip ]; then
  log "creating the project venv in .venv"
  rm -rf .venv
  "$PY" -m venv .venv
fi

# torch: --no-deps keeps the CUDA wheels (2.7 GB) out; libtorch_cpu needs only these two.
if ! .venv/bin/python -c 'import importlib.util,sys; sys.exit(0 if importlib.util.find_spec("torch") else 1)' 2>/dev/null; then
  log "installing torch==2.11.0 (CPU libraries, about 550 MB)"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps \
    torch==2.11.0 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cupti==13.0.85
fi

# The trainer builds against this libtorch (.cargo/config.toml: LIBTORCH=.venv/libtorch).
torch_dir=$(.venv/bin/python -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')/torch
ln -sfn "$(realpath --relative-to=.venv "$torch_dir")" .venv/libtorch

need=()
.venv/bin/python -c 'import pyarrow' 2>/dev/null || need+=(pyarrow)
.venv/bin/python -c 'import duckdb' 2>/dev/null || need+=(duckdb)
[ -x .venv/bin/moto_server ] || need+=("moto[server]")
.venv/bin/python -c 'import chess' 2>/dev/null || need+=(chess)
# The independent evaluator of nets in saved layouts (tests/py/layout_eval.py).
.venv/bin/python -c "import numpy" 2>/dev/null || need+=(numpy)
# The API fuzzer the tests run against /v1/openapi.json (tests/tests/api_fuzz.rs).
[ -x .venv/bin/schemathesis ] || need+=(schemathesis==4.32.5)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} into .venv"
  .venv/bin/pip install -q --disable-pip-version-check "${need[@]}"
fi
log "ready: redis-server $(redis-server --version | awk '{print $3}'), torch $(.venv/bin/python -c 'import importlib.metadata as m;print(m.version("torch"))')"
