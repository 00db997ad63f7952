#!/usr/bin/env bash
# Installs what `make bench` and the chart-rendering test use beyond
# scripts/ensure-deps.sh, from Debian's packages, when missing: chromium
# (headless, to check the HTML report renders), lz4 and zstd (to restore
# compressed plain dumps with psql) and pgcopydb (compared with). The
# benchmark skips, with a row saying so, whatever is still missing; the
# test skips the browser check without chromium. PostgreSQL 16-18 client
# programs (for lz4/zstd in pg_dump) come from scripts/install-pg-versions.sh
# where that script exists.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v lz4 >/dev/null 2>&1 || missing+=(lz4)
command -v zstd >/dev/null 2>&1 || missing+=(zstd)
command -v pgcopydb >/dev/null 2>&1 || missing+=(pgcopydb)
# TPC-H's generator for bench/scale's tpch dataset, from PyPI.
if ! command -v tpchgen-cli >/dev/null 2>&1; then
  python3 -m pip install --quiet tpchgen-cli==4.0.0 >&2
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "ensure-bench-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
