# pgsprint: `make demo` shows it working, `make test` proves it.
GO ?= go
TEST_TIMEOUT ?= 25m

.PHONY: all build dist deps deps-demo test test-long test-matrix demo vet fmt clean bench bench-quick bench-deps bench-crypt bench-scale bench-pack

all: build

# What `pgsprint --version` shows beside the Go version and the zstd
# compressor: scripts/version.sh (git describe), the commit, the build time.
VERSION ?= $(shell scripts/version.sh)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/pgsprint ./cmd/pgsprint

# Release files in dist/: pgsprint_VERSION_linux_amd64.tar.gz (static
# binary, man pages, completions), pgsprint_VERSION_amd64.deb (Depends:
# postgresql-client) and SHA256SUMS. See scripts/dist.sh.
dist:
	@VERSION=$(VERSION) scripts/dist.sh dist

# Everything the tests need: Go modules, one PostgreSQL (Debian's) and the
# extra majors under /opt/pgsprint-pg (scripts/install-pg-versions.sh).
deps:
	@scripts/ensure-deps.sh

# What the demo needs: Go modules and one PostgreSQL.
deps-demo:
	@scripts/ensure-deps.sh --demo

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...
	@scripts/check-doc-names.sh

# The major versions the cross-version tests use under `make test`: the
# oldest installed, Debian's, and the newest (see scripts/install-pg-versions.sh).
TEST_PG_VERSIONS ?= 13,15,18

# Unit tests and integration tests against throwaway PostgreSQL clusters.
# TEST_DIR: where the test clusters' directories are made; empty, /dev/shm
# when it has 8 GiB free (a disk's file system costs the test servers a
# fifth of their CPU), else $TMPDIR; TEST_DIR=/tmp keeps them on disk.
TEST_DIR ?=

# TEST_PARALLEL and TEST_PACKAGES: how many tests of a package, and how
# many packages, run at once (go test -parallel and -p); empty, go test's
# default, the cores. The database tests wait (for servers, kills,
# replication) as well as compute, so more at once kept 2 cores busier,
# but every test then took longer and paid more for it: the writers and
# pollers that run for a test's whole wall time, and a server's sessions
# competing for the cores. On 2 cores, make test (vet and go test) took
# 365 s and 708 CPU-s at -p 2 -parallel 2, 368 s and 724 at 2 and 3, 395 s
# and 784 at 3 and 3; at 4 and 4 (the former setting, before six cases
# moved to make test-long) it took 444-473 s and 882-939 CPU-s.
TEST_PARALLEL ?=
TEST_PACKAGES ?=

# TEST_BUILD: how go test builds the test binaries. -vet=off: the vet
# target above already ran every analyzer on the same files, and go
# test's own pass cost 29 CPU-s more after a change. -ldflags=-w: no DWARF
# in the 44 test binaries (panics and stack traces use the pclntab, which
# stays): linking them all after a change took 97 CPU-s instead of 139.
TEST_BUILD ?= -vet=off -ldflags=-w

test: deps vet
	PGSPRINT_TEST_DIR=$(TEST_DIR) PGSPRINT_TEST_REQUIRE_PG=1 PGSPRINT_TEST_PG_VERSIONS=$(TEST_PG_VERSIONS) $(GO) test $(TEST_BUILD) -count=1 $(if $(TEST_PACKAGES),-p $(TEST_PACKAGES)) $(if $(TEST_PARALLEL),-parallel $(TEST_PARALLEL)) -timeout $(TEST_TIMEOUT) ./...

# Everything `make test` runs, plus the slow repetitions it runs once
# (kill iterations: build tag `long`) and the full version matrix of every
# installed major (below).
test-long: deps vet
	PGSPRINT_TEST_DIR=$(TEST_DIR) PGSPRINT_TEST_REQUIRE_PG=1 PGSPRINT_TEST_PG_MATRIX=full $(GO) test -tags long -ldflags=-w -count=1 -timeout 60m ./...

# Every installed major version: each loads the torture schema, every pair
# (source <= target) round-trips, and each is dumped from a standby.
test-matrix: deps
	PGSPRINT_TEST_REQUIRE_PG=1 PGSPRINT_TEST_PG_MATRIX=full $(GO) test -count=1 -timeout 30m \
		-run 'TestEveryVersion|TestCrossVersion|TestDumpFromStandby' ./internal/pgtest ./internal/clone

# A throwaway cluster with sample data: dump, restore, verify, show numbers.
demo: deps-demo
	$(GO) run ./cmd/pgsprint demo

# The benchmark report (docs/BENCHMARKS.md): pg_dump's format x compression
# matrix, pgsprint's codecs, clones; every restore verified. Results (CSV,
# Markdown, HTML with SVG charts) go to bench/out/<time>-<size>/.
# Knobs: SCALE (dataset size, 1 is about 150-250 MB per dataset), JOBS,
# LEVELS (pg_dump's, e.g. "gzip=1,5,9 lz4=1,5,12 zstd=1,5,15,22"),
# DATASETS (pgbench,parts,mixed,many,fk,small), TABLES (the small dataset's
# table count), BENCH_FLAGS (anything else).
BENCH_ARGS = $(if $(SCALE),-scale $(SCALE)) $(if $(JOBS),-j $(JOBS)) $(if $(LEVELS),-levels "$(LEVELS)") $(if $(DATASETS),-datasets $(DATASETS)) $(if $(TABLES),-tables $(TABLES)) $(BENCH_FLAGS)

bench: deps
	$(GO) run ./bench/report -size full $(BENCH_ARGS)

bench-quick: deps
	$(GO) run ./bench/report -size quick $(BENCH_ARGS)

# What encryption costs: dump and restore of pgbench (SCALE, default 30),
# clear and encrypted, alternated in one run at JOBS (default 2).
bench-crypt: deps
	$(GO) run ./bench/crypt $(if $(SCALE),-scale $(SCALE)) $(if $(JOBS),-j $(JOBS))

# What the benchmark and its chart test use beyond `make deps`: headless
# Chromium to render the page, lz4 and zstd to decompress plain dumps,
# pgcopydb to compare with.
bench-deps: deps
	@scripts/ensure-bench-deps.sh

# Seed 000's datasets at its size (pgbench -s 1000: about 12 GiB, one table
# and 30 partitions), the mixed dataset (10 GB) and TPC-H (SF 1) through
# every pgsprint path beside the peers (pg_dump, pg_restore + vacuumdb, a
# hand-made restore, pgcopydb, the raw COPY limit), rounds interleaved
# (docs/BENCHMARKS.md, "At 12 GiB"), and 10,000 small tables, dumped
# against pg_dump --schema-only alone. TPC-H needs tpchgen-cli (make
# bench-deps). Knobs: SCALE (default 1000), MIXED, TPCH_SF, TABLES,
# DATASETS (flat,parts,mixed,tpch,tables), JOBS, ROUNDS, TRACE (all, or
# datasets such as mixed,tpch: sample pg_stat_activity every 100 ms during
# every step, the "Where time goes" table and traces.json;
# docs/BENCHMARKS.md), BENCH_FLAGS (e.g. -dsn 'host=... port=...' -keep -out DIR).
bench-scale: deps
	$(GO) run ./bench/scale $(if $(SCALE),-scale $(SCALE)) $(if $(MIXED),-mixed-scale $(MIXED)) $(if $(TPCH_SF),-tpch-sf $(TPCH_SF)) $(if $(TABLES),-tables $(TABLES)) $(if $(DATASETS),-datasets $(DATASETS)) $(if $(JOBS),-j $(JOBS)) $(if $(ROUNDS),-rounds $(ROUNDS)) $(if $(TRACE),-trace=$(TRACE)) $(BENCH_FLAGS)

# The bench pack for a many-core machine with nothing installed:
# dist/bench-pack.tar.xz (static pgsprint, the runner, PostgreSQL 18 with
# pgbench, run.sh). Unpack it there and run bench-pack/run.sh.
bench-pack:
	@scripts/bench-pack.sh dist

clean:
	rm -rf bin dist
