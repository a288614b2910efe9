# Tessera: `make demo` sets everything up and runs the quickstart; `make test` runs every test.
# Both install what they need into .venv (Python packages) and build the engine in release mode;
# `make lint` runs rustfmt, clippy, ruff and mypy.

VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.deps-stamp
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: all demo test build venv rust-test py-test stress bench bench-quick bench-deps lint fmt clean fuzz ssdb-bench \
	ssdb-deps ssdb-deps-optional ssdb-postgres

all: test

$(STAMP): requirements-dev.txt
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements-dev.txt
	touch $@

venv: $(STAMP)

# The Python extension (release build of the engine) and the `tessera` command, both installed
# into .venv (`.venv/bin/tessera`; on PATH once the virtualenv is active), and the S3 test server
# the Python tests start (target/release/tessera-s3-server, see python/tests/s3server.py). Cargo
# rebuilds only what changed, so a repeated `make build` is quick.
build: venv
	$(VENV)/bin/maturin develop --release -q
	cargo build --release --locked -q -p tessera-cli
	install -m 755 target/release/tessera $(VENV)/bin/tessera
	cargo build --release --locked -q -p tessera-s3-server

demo: build
	$(PY) examples/quickstart.py

# Release speed with integer overflow checks on (profile test-release in Cargo.toml): an
# unchecked size or count computation fails a test instead of wrapping.
# (venv: the SS-DB tests make the sky tiles with numpy, see docs/ssdb.md.)
rust-test: venv
	cargo test --profile test-release --workspace --exclude tessera-py

# (ssdb-deps-optional: the PostgreSQL baseline's test needs PostgreSQL + PostGIS, and is skipped
# with the reason when they cannot be installed.)
py-test: build ssdb-deps-optional
	$(PY) -m pytest -q python/tests

test: rust-test py-test

# The multi-process stress test (issue 12) for 5 minutes instead of `make test`'s 20 s, failing
# on any violation.
STRESS_SECONDS ?= 300
stress: build
	TESSERA_STRESS_SECONDS=$(STRESS_SECONDS) $(PY) -m pytest -q -s python/tests/test_stress.py

# Rust: formatting, clippy and rustdoc's link checks (warnings are errors); Python: ruff on python/ and mypy (strict)
# on the package, both configured in pyproject.toml and installed into .venv.
lint: venv
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --document-private-items -q
	$(VENV)/bin/ruff check python/
	$(VENV)/bin/mypy python/tessera

fmt:
	cargo fmt --all

clean:
	rm -rf target $(VENV) fuzz/target

# Fuzzing (not part of `make test`, which runs each target briefly through `tessera::fuzz`'s
# tests): every cargo-fuzz target in fuzz/ for FUZZ_SECONDS each, with libFuzzer's memory caps,
# on the nightly toolchain. Installs cargo-fuzz when missing. Crashes land in fuzz/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(notdir $(basename $(wildcard fuzz/fuzz_targets/*.rs)))

fuzz:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
		echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
		(cd fuzz && cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) \
			-rss_limit_mb=2048 -malloc_limit_mb=64 -timeout=10) || exit 1; \
	done

# Benchmarks (not tests): dense load/read at full size (~1 GiB), statistics overhead and the
# tile cache; then the peer suite (bench/, issue 6): Tessera against TileDB-Py, HDF5, Zarr,
# TensorStore, DuckDB and Parquet on the TileDB paper's workloads (~1 GiB dense, 10M sparse
# points; results in bench/out/ and docs/benchmarks.md); then the S3 benchmark (issue 16: Tessera,
# Zarr + obstore and TileDB-Py on a local tessera-s3-server, ~2 minutes).
BENCH_STAMP := $(VENV)/.bench-deps-stamp
BENCH_ARGS  ?=   # extra options of bench/run.py, e.g. BENCH_ARGS="--engines tessera,h5py --no-docs"
# No engine here does linear algebra: numpy's OpenBLAS threads only take cores from the engines.
BENCH_ENV   := OPENBLAS_NUM_THREADS=1

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
	$(BENCH_ENV) $(PY) bench/run.py $(BENCH_ARGS)
	$(BENCH_ENV) $(PY) bench/s3_bench.py
	$(BENCH_ENV) $(PY) bench/layout_bench.py
	$(BENCH_ENV) $(PY) bench/chunk_tradeoff.py

# A short run of the same benchmarks (~100 MB dense, 1M sparse points; a few minutes).
bench-quick: build bench-deps
	cargo bench -p tessera --bench dense -- --rows 4000 --cols 5000 --reps 5
	cargo bench -p tessera --bench stats
	$(PY) bench/run.py --quick $(BENCH_ARGS)

# SS-DB (docs/ssdb.md): load, cook, group and query configuration CONFIG (micro, tiny, very-small,
# small, ...) into target/ssdb/CONFIG (or SSDB_DIR), timed per cycle, with peak memory and bytes
# on disk; then the PostgreSQL/PostGIS and TileDB-Py baselines on the same data, every checksum
# compared, and the paper's Table I with ratios and a chart into docs/ssdb.md. very-small needs
# ~1 GB of disk, small ~10 GB.
CONFIG   ?= tiny
SSDB_DIR ?= target/ssdb/$(CONFIG)
# SSDB_BENCH_ARGS=--reuse-baselines takes a baseline report made apart (make ssdb-postgres).
SSDB_BENCH_ARGS ?=
ssdb-bench: build bench-deps ssdb-deps
	$(PY) bench/ssdb_bench.py --config $(CONFIG) --dir $(SSDB_DIR) --binary target/release/tessera \
		--baselines postgres,tiledb $(SSDB_BENCH_ARGS)

# SS-DB baselines (issue 14, docs/ssdb.md "Baselines"): PostgreSQL 15 with PostGIS from Debian's
# packages. Installed with apt-get when missing and when root; otherwise says what to install.
# The Python side (psycopg 3) is in requirements-dev.txt.
PG_BINDIR ?= /usr/lib/postgresql/15/bin
POSTGIS_CONTROL ?= /usr/share/postgresql/15/extension/postgis.control
ssdb-deps:
	@if [ -x $(PG_BINDIR)/initdb ] && [ -f $(POSTGIS_CONTROL) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-postgis-3; \
	else \
		echo "ssdb-deps: PostgreSQL 15 with PostGIS is missing: install postgresql-15-postgis-3 as root" >&2; \
		exit 1; \
	fi

# The same, never failing (for `make test`: the baseline's test then skips with the reason).
ssdb-deps-optional:
	-@$(MAKE) --no-print-directory ssdb-deps

# The PostgreSQL/PostGIS baseline on CONFIG (micro, tiny): its report in $(SSDB_DIR)-postgres.
ssdb-postgres: build ssdb-deps
	$(PY) -m tessera.ssdb.postgres --config $(CONFIG) --dir $(SSDB_DIR)-postgres
