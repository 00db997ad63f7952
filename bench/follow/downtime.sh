#!/usr/bin/env bash
# The cutover's downtime, measured: pgbench writes to the source through
# `pgsprint clone --follow`, the target lags behind for LAG seconds, then
# `pgsprint follow finish` fences the source and hands over. It prints the
# write downtime and the verification time finish reports, the apply lag
# sampled during the load, and for comparison the wall time of
# `pgsprint dump -j2 | pgsprint restore -j2` of the same database (the
# downtime the offline path needs), and of pgcopydb's cutover when
# pgcopydb is installed (writes stopped to pgcopydb done).
#
#   SOURCE="host=/run/postgresql port=5432 dbname=bench" \
#   TARGET="host=/run/postgresql port=5432" ./bench/follow/downtime.sh
#
# SOURCE is a database with pgbench's tables (pgbench -i -s N); its server
# needs wal_level = logical. TARGET is a keyword connection string without
# dbname, of the server the copies go to (it may be the source's own):
# the script creates and drops there the databases <source>_follow,
# <source>_offline and <source>_pgcopydb. Knobs (environment): LAG (seconds
# of writes between the copy and finish, default 60), EXTRA_MB (size of the
# extra table downtime_extra added to the source, default 1024; 0 for none;
# kept for the next run), CLIENTS and THREADS (pgbench -c and -j, default 4
# and 2), JOBS (pgsprint -j, default 2), PGSPRINT (the binary, default
# pgsprint on PATH), PGCOPYDB (auto: when installed, default; 0: never),
# SAMPLE (seconds between lag samples, default 2), OUT (a directory for
# the logs, default a temporary one). The source is left writable and
# without replication objects; the copies are dropped at the end unless
# KEEP=1.
set -euo pipefail

: "${SOURCE:?SOURCE: a connection string of the source database (with pgbench tables)}"
: "${TARGET:?TARGET: a keyword connection string of the target server, without dbname}"
lag="${LAG:-60}"
extra_mb="${EXTRA_MB:-1024}"
clients="${CLIENTS:-4}"
threads="${THREADS:-2}"
jobs="${JOBS:-2}"
pgsprint="${PGSPRINT:-pgsprint}"
sample="${SAMPLE:-2}"
out="${OUT:-$(mktemp -d /tmp/pgsprint-downtime.XXXXXX)}"
mkdir -p "$out"

for p in psql pgbench "$pgsprint"; do
  command -v "$p" >/dev/null || { echo "downtime.sh: $p not found" >&2; exit 2; }
done
pgcopydb=""
if [ "${PGCOPYDB:-auto}" != 0 ] && command -v pgcopydb >/dev/null; then pgcopydb=pgcopydb; fi

say() { echo "downtime.sh: $*" >&2; }
export PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c client_min_messages=warning"
src() { psql "$SOURCE" -X -q -v ON_ERROR_STOP=1 -At "$@"; }
tgt() { psql "$TARGET dbname=postgres" -X -q -v ON_ERROR_STOP=1 -At "$@"; }
# secs turns a Go duration (850ms, 2.31s, 1m2.5s, 12µs) into seconds.
secs() {
  awk -v d="$1" 'BEGIN { t = 0; while (match(d, /^[0-9.]+(h|ms|µs|us|ns|m|s)/)) {
    u = substr(d, RSTART, RLENGTH); n = u + 0; sub(/^[0-9.]+/, "", u)
    t += n * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : u == "ms" ? 0.001 : u == "ns" ? 1e-9 : 1e-6)
    d = substr(d, RLENGTH + 1) } printf "%.2f", t }'
}
# now is a clock in seconds with fractions.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

db="$(src -c 'SELECT current_database()')"
src -c 'SELECT 1 FROM pgbench_accounts LIMIT 1' >/dev/null ||
  { say "the source has no pgbench_accounts: run pgbench -i -s N on it first"; exit 2; }
if [ "$(src -c 'SHOW wal_level')" != logical ]; then
  say "the source server has wal_level = $(src -c 'SHOW wal_level'): set it to logical and restart"; exit 2
fi
scale="$(src -c 'SELECT count(*) FROM pgbench_branches')"

if [ "$extra_mb" -gt 0 ]; then
  have="$(src -c "SELECT coalesce(pg_table_size(to_regclass('downtime_extra')) / 1048576, -1)")"
  if [ "$have" -lt $((extra_mb * 9 / 10)) ] || [ "$have" -gt $((extra_mb * 11 / 10)) ]; then
    say "filling downtime_extra with about $extra_mb MB"
    # About 1 kB a row, about 7.7 rows an 8 kB page.
    src -c 'DROP TABLE IF EXISTS downtime_extra' \
      -c 'CREATE TABLE downtime_extra (id bigint PRIMARY KEY, pad text)' \
      -c "INSERT INTO downtime_extra SELECT i, repeat(md5(i::text), 31) FROM generate_series(1, $extra_mb * 1024 * 1024 / 1064) i" \
      -c 'VACUUM ANALYZE downtime_extra'
  fi
fi
size="$(src -c 'SELECT pg_size_pretty(pg_database_size(current_database()))')"

follow_db="${db}_follow" offline_db="${db}_offline" pgcopydb_db="${db}_pgcopydb"
fresh() { tgt -c "DROP DATABASE IF EXISTS \"$1\"" -c "CREATE DATABASE \"$1\""; }
cleanup() {
  [ -n "${bench_pid:-}" ] && kill "$bench_pid" 2>/dev/null && wait "$bench_pid" 2>/dev/null
  "$pgsprint" follow abort --source "$SOURCE" --target "$TARGET dbname=$follow_db" >>"$out/abort.log" 2>&1 || true
  if [ "${KEEP:-0}" != 1 ]; then
    for d in "$follow_db" "$offline_db" "$pgcopydb_db"; do tgt -c "DROP DATABASE IF EXISTS \"$d\"" 2>/dev/null || true; done
  fi
}
trap cleanup EXIT

# pgbench runs until stopped: its sessions are ended by the fence.
writes() { pgbench -n -c "$clients" -j "$threads" -T 100000 -P 5 "$SOURCE" >"$out/$1.pgbench.log" 2>&1 & bench_pid=$!; }
stop_writes() {
  if [ -n "${bench_pid:-}" ]; then kill "$bench_pid" 2>/dev/null || true; wait "$bench_pid" 2>/dev/null || true; bench_pid=""; fi
}
# lag samples, every $sample seconds for $lag seconds, the slot's bytes
# behind the source's WAL and the walsender's replay_lag, into $1.
sample_lag() {
  local slot="$1" file="$2" until
  until=$(($(date +%s) + lag))
  : >"$file"
  while [ "$(date +%s)" -lt "$until" ]; do
    src -F ' ' -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
        coalesce(extract(epoch FROM r.replay_lag), 0)::numeric(10, 2)
      FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid
      WHERE s.slot_name = '$slot'" >>"$file" || true
    sleep "$sample"
  done
}
# lag_summary prints "median / max bytes, max replay_lag s" of a samples file.
lag_summary() {
  sort -n "$1" | awk '{ b[NR] = $1; if ($2 > r) r = $2; if ($1 > m) m = $1 }
    END { if (NR == 0) { print "no samples"; exit } printf "%.1f / %.1f MB behind (median / max of %d samples), replay_lag max %.2f s", b[int((NR + 1) / 2)] / 1048576, m / 1048576, NR, r }'
}

say "pgsprint clone --follow of $db (pgbench -s $scale, $size) while pgbench -c $clients -j $threads writes"
fresh "$follow_db"
writes follow
sleep 2
t0="$(now)"
"$pgsprint" clone --follow -q --replica-identity-full -j "$jobs" --source "$SOURCE" --target "$TARGET dbname=$follow_db" >"$out/clone.log" 2>&1 ||
  { say "clone --follow failed:"; cat "$out/clone.log" >&2; exit 1; }
clone_s="$(elapsed "$t0")"
say "following; $lag s of writes, lag sampled every $sample s"
sample_lag "pgsprint_$follow_db" "$out/lag.txt"
say "pgsprint follow finish"
t0="$(now)"
"$pgsprint" follow finish -j "$jobs" --source "$SOURCE" --target "$TARGET dbname=$follow_db" >"$out/finish.log" 2>&1 ||
  { say "follow finish failed:"; cat "$out/finish.log" >&2; exit 1; }
finish_s="$(elapsed "$t0")"
stop_writes
line="$(grep '^follow finish: target equals source' "$out/finish.log")"
downtime="$(secs "$(sed -E 's/.*write downtime ([^ ]+) .*/\1/' <<<"$line")")"
verification="$(secs "$(sed -E 's/.*verification ([^,]+),.*/\1/' <<<"$line")")"
handover="$(secs "$(sed -E 's/.*handover ([^,]+),.*/\1/' <<<"$line")")"
ended="$(sed -nE 's/.*, ([0-9]+) sessions ended.*/\1/p' <<<"$line")"
los="$(grep '^large objects:' "$out/finish.log" || echo 'large objects: none')"
tps="$(sed -nE 's/^progress: .* s, ([0-9.]+) tps.*/\1/p' "$out/follow.pgbench.log" | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "?" }')"
"$pgsprint" follow abort --source "$SOURCE" --target "$TARGET dbname=$follow_db" >"$out/abort.log" 2>&1 ||
  { say "follow abort (to lift the fence) failed:"; cat "$out/abort.log" >&2; exit 1; }

say "pgsprint dump -j$jobs | pgsprint restore -j$jobs"
fresh "$offline_db"
t0="$(now)"
"$pgsprint" dump -j "$jobs" -d "$SOURCE" -f - 2>"$out/dump.log" |
  "$pgsprint" restore -j "$jobs" -f - -d "$TARGET dbname=$offline_db" >"$out/restore.log" 2>&1 ||
  { say "dump | restore failed:"; cat "$out/dump.log" "$out/restore.log" >&2; exit 1; }
offline_s="$(elapsed "$t0")"

pgc_row=""
if [ -n "$pgcopydb" ]; then
  say "pgcopydb clone --follow"
  fresh "$pgcopydb_db"
  rm -rf "$out/pgcopydb"
  writes pgcopydb
  sleep 2
  # In a process group of its own (setsid), so that a stuck run can be
  # ended with all its workers: a killed leader waits for them.
  setsid pgcopydb clone --follow --table-jobs "$jobs" --index-jobs "$jobs" --dir "$out/pgcopydb" \
    --source "$SOURCE" --target "$TARGET dbname=$pgcopydb_db" >"$out/pgcopydb.log" 2>&1 &
  pgc_pid=$!
  # pgcopydb's cutover has no fence: the writes stop, then the end
  # position is set to the source's current WAL position, and pgcopydb
  # exits once it has applied up to it.
  sleep "$lag"
  stop_writes
  t0="$(now)"
  pgcopydb stream sentinel set endpos --current --source "$SOURCE" >>"$out/pgcopydb.log" 2>&1 || true
  # It may never reach the end position (a failed apply): give up after
  # PGCOPYDB_TIMEOUT seconds (default 600). Done means it exited 0 on its
  # own, before the deadline, with no ERROR in its log (0.10 with wal2json
  # logs "BUG: logical message xid ..." under pgbench's writes, stops
  # streaming and waits forever; killed, it may still exit 0).
  deadline=$(($(date +%s) + ${PGCOPYDB_TIMEOUT:-600}))
  while kill -0 "$pgc_pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
  timed_out=0
  if kill -0 "$pgc_pid" 2>/dev/null; then
    timed_out=1
    kill -TERM -- "-$pgc_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pgc_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pgc_pid" 2>/dev/null || true
  fi
  pgc_rc=0
  wait "$pgc_pid" || pgc_rc=$?
  if [ "$timed_out" = 0 ] && [ "$pgc_rc" = 0 ] && ! grep -q -E ' (ERROR|FATAL) ' "$out/pgcopydb.log"; then
    pgc_row="| pgcopydb clone --follow: writes stopped to done | $(elapsed "$t0") | no fence, no verification: the writes must stop first |"
  else
    why="$(grep -m1 -E 'FATAL|ERROR' "$out/pgcopydb.log" | sed -E 's/^[0-9:]+ [0-9]+ //; s/[|]/\\|/g' | cut -c1-200 || true)"
    [ "$timed_out" = 1 ] && why="no end after ${PGCOPYDB_TIMEOUT:-600} s, killed; ${why}"
    pgc_row="| pgcopydb clone --follow | failed | ${why} (log: $out/pgcopydb.log) |"
  fi
  pgcopydb stream cleanup --dir "$out/pgcopydb" --source "$SOURCE" --target "$TARGET dbname=$pgcopydb_db" >>"$out/pgcopydb.log" 2>&1 || true
fi

cat <<EOF

### Cutover of pgbench -s $scale ($size$([ "$extra_mb" -gt 0 ] && echo ", downtime_extra about $extra_mb MB")), $lag s of lag

pgbench -c $clients -j $threads, median $tps tps; pgsprint -j $jobs; $(date -u +%Y-%m-%dT%H:%MZ); logs in $out

| step | seconds | notes |
|---|---:|---|
| pgsprint clone --follow (copy under writes) | $clone_s | |
| apply lag during the load | | $(lag_summary "$out/lag.txt") |
| **follow finish: write downtime** | **$downtime** | fence to target ready; ${ended:-0} sessions ended; $los |
| follow finish: verification | $verification | compare --schema, writes already stopped |
| follow finish: handover | $handover | subscription, slot, publication dropped |
| follow finish: total | $finish_s | fence, grace, catch-up, verification, handover |
| pgsprint dump -j$jobs \| pgsprint restore -j$jobs | $offline_s | the downtime of an offline copy |
${pgc_row}
EOF
