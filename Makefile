# lakefish — every target installs what it needs first (see infra/setup.sh).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: setup cuda build build-bench demo quality test lint bench bench-train clean-demo

setup:
	@bash infra/setup.sh

# On a machine with an NVIDIA GPU: torch's CUDA libraries into .venv (about 2.7 GB from PyPI;
# setup installs the CPU ones only). `lakefish train --device cuda` (or auto) then uses the GPU.
cuda: setup
	.venv/bin/pip install -q --disable-pip-version-check torch==2.11.0

build: setup
	$(CARGO) build --release --bin lakefish

# The main job end to end on the embedded default (SQLite queue, local-directory lake).
demo: build
	@bash infra/demo.sh

# The quality run (issue 20): self-play only, a SCReLU net, an SPRT on the clock against the
# hand-written evaluation; 40 minutes to hours (ROUNDS=N for N rounds; QUICK=1 for the quick
# scale, under 45 minutes). Nothing else may run beside it: the SPRT plays on the clock.
quality: build
	@bash infra/quality.sh

# Unit, integration and end-to-end tests (real redis-server, real S3-compatible server).
test: setup
	$(CARGO) build --bin lakefish --bin lakefish-bench
	$(CARGO) test --workspace --no-fail-fast

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The benchmarks are a binary of their own (`lakefish bench ...` runs it): the production
# build leaves it out.
build-bench: setup
	$(CARGO) build --release --bin lakefish --bin lakefish-bench

bench: build-bench
	target/release/lakefish bench ingest-binpack $${BENCH_FILE:-../shared/data/binpack/small.binpack}

# Trainer vs a plain PyTorch loop on the same batches. The reference needs Python torch with
# its CUDA libraries (several GB from PyPI), so it gets its own venv, only for this bench.
bench-train: build-bench
	@test -x .venv-bench/bin/python || (python3 -m venv .venv-bench && .venv-bench/bin/pip install -q torch==2.11.0 numpy)
	target/release/lakefish bench train $${BENCH_FILE:-../shared/data/binpack/small.binpack}

clean-demo:
	rm -rf demo-run
