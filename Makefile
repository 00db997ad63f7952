# pgsprint: `make demo` shows it working, `make test` proves it.
GO ?= go
TEST_TIMEOUT ?= 14m

.PHONY: all build deps test demo vet fmt clean

all: build

build:
	$(GO) build -o bin/pgsprint ./cmd/pgsprint

deps:
	@scripts/ensure-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Unit tests and integration tests against throwaway PostgreSQL clusters.
test: deps vet
	PGSPRINT_TEST_REQUIRE_PG=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# A throwaway cluster with sample data: dump, restore, verify, show numbers.
demo: deps
	$(GO) run ./cmd/pgsprint demo

clean:
	rm -rf bin
