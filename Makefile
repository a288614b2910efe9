# Tessera: `make demo` sets everything up and runs the quickstart; `make test` runs every test.
# Both install what they need into .venv (Python packages) and build the engine in release mode.

VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.deps-stamp
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: all demo test build venv rust-test py-test bench bench-quick bench-deps lint fmt clean

all: test

$(STAMP): requirements-dev.txt
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements-dev.txt
	touch $@

venv: $(STAMP)

# The Python extension (release build of the engine) installed into .venv.
build: venv
	$(VENV)/bin/maturin develop --release -q

demo: build
	$(PY) examples/quickstart.py

# Release speed with integer overflow checks on (profile test-release in Cargo.toml): an
# unchecked size or count computation fails a test instead of wrapping.
rust-test:
	cargo test --profile test-release --workspace --exclude tessera-py

py-test: build
	$(PY) -m pytest -q python/tests

test: rust-test py-test

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

fmt:
	cargo fmt --all

clean:
	rm -rf target $(VENV)

# Benchmarks (not tests): dense load/read at full size (~1 GiB), statistics overhead and the
# tile cache; then the peer suite (bench/, issue 6): Tessera against TileDB-Py, HDF5, Zarr,
# TensorStore, DuckDB and Parquet on the TileDB paper's workloads (~1 GiB dense, 10M sparse
# points; results in bench/out/ and docs/benchmarks.md).
BENCH_STAMP := $(VENV)/.bench-deps-stamp
BENCH_ARGS  ?=   # extra options of bench/run.py, e.g. BENCH_ARGS="--engines tessera,h5py --no-docs"

$(BENCH_STAMP): requirements-bench.txt $(STAMP)
	$(PIP) install -q -r requirements-bench.txt
	touch $@

bench-deps: $(BENCH_STAMP)

bench: build bench-deps
	cargo bench -p tessera --bench dense
	cargo bench -p tessera --bench stats
	cargo bench -p tessera --bench fragments
	cargo bench -p tessera --bench fragments_sparse
	cargo bench -p tessera --bench sparse
	$(PY) bench/run.py $(BENCH_ARGS)

# A short run of the same benchmarks (~100 MB dense, 1M sparse points; a few minutes).
bench-quick: build bench-deps
	cargo bench -p tessera --bench dense -- --rows 4000 --cols 5000 --reps 5
	cargo bench -p tessera --bench stats
	$(PY) bench/run.py --quick $(BENCH_ARGS)
