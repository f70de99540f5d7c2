# lakefish — every target installs what it needs first (see infra/setup.sh).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: setup build demo test lint bench clean-demo

setup:
	@bash infra/setup.sh

build: setup
	$(CARGO) build --release --bin lakefish

# The main job end to end on the embedded default (SQLite queue, local-directory lake).
demo: build
	@bash infra/demo.sh

# Unit, integration and end-to-end tests (real redis-server, real S3-compatible server).
test: setup
	$(CARGO) build --bin lakefish
	$(CARGO) test --workspace --no-fail-fast

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: build
	target/release/lakefish bench ingest-binpack $${BENCH_FILE:-../shared/data/binpack/small.binpack}

clean-demo:
	rm -rf demo-run
