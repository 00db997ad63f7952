#!/bin/bash
# Issue 32's measurements (docs/BENCHMARKS.md): a 1% subset against a raw
# COPY of just the rows it keeps, on pgbench s100 with its foreign keys and
# on the FK-heavy dataset; and masking three text columns of a 1 GB table
# against the unmasked dump. Wall seconds, ROUNDS rounds (default 3), the
# two sides of each comparison run back to back in each round.
#
# SERVER is a keyword connection string without dbname, PGSPRINT the
# binary, OUT a scratch directory, PARTS which parts to run (default
# "pgbench fk mask"). The databases, as they were made:
#   subset_s100: pgbench -i -s 100, then ALTER TABLE ... ADD FOREIGN KEY for
#     tellers(bid), accounts(bid), history(bid, tid, aid), and 1,000,000
#     history rows (aid spread over all accounts, bid and tid to match);
#   fkheavy_4: bench/dataset's FK-heavy dataset at scale 4 (24 tables, 30
#     foreign keys, a self reference; 9.8M rows);
#   mask_1g: people(id bigint primary key, email, full_name, phone, city
#     text, signup date), 8,000,000 generated rows whose e-mails and
#     phones are all distinct (user<N>@example.com, +1-555-<N>), whose
#     full names come round 5,000 in turn (Firstname<N> Lastname<M>), and
#     which compress 15:1; and people_real, the same columns with values drawn
#     like real ones (bench/devcopy_people_real.sql; 60 first and 60 last names, random numbers in
#     e-mails and phones, 8 mail domains, 30 cities): 853 MB.
set -u
B=${PGSPRINT:-pgsprint}
H="${SERVER:-host=/work/scale-pg port=45432 user=postgres}"
out=${OUT:-/tmp/pgsprint-devcopy}; mkdir -p $out
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-pgbench fk mask}
secret=$out/secret; echo "bench-mask-secret-$$" > $secret; chmod 600 $secret
t() { local s=$(date +%s.%N); "$@" > $out/last.log 2>&1; local rc=$?; local e=$(date +%s.%N); printf "%.2f rc=%d\n" $(echo "$e-$s"|bc) $rc; }
rows() { psql "$H dbname=$1" -qAtX -c "$2"; }
has() { [[ " $PARTS " == *" $1 "* ]]; }

if has pgbench; then
echo "## subset: 1% of pgbench s100 (branches bid <= 1, children), $(date -u +%FT%TZ)"
for r in $(seq $ROUNDS); do
  echo "round $r"
  echo -n "  pgsprint dump --subset -j2: "; t $B dump -d "$H dbname=subset_s100" -f $out/sub.pgs -j 2 -q --overwrite --subset 'public.pgbench_branches: bid <= 1' --subset-children
  echo -n "  raw COPY of the kept rows (4 queries, sequential, to zstd): "; t bash -c "
    for q in 'select * from pgbench_branches where bid <= 1' 'select * from pgbench_tellers where bid <= 1' 'select * from pgbench_accounts where bid <= 1' 'select * from pgbench_history where bid <= 1'; do
      psql '$H dbname=subset_s100' -qAtX -c \"copy (\$q) to stdout\"; done | zstd -q -1 > $out/raw.zst"
  echo -n "  raw COPY, 2 at once (accounts | the rest): "; t bash -c "
    psql '$H dbname=subset_s100' -qAtX -c 'copy (select * from pgbench_accounts where bid <= 1) to stdout' | zstd -q -1 > $out/raw1.zst &
    for q in 'select * from pgbench_branches where bid <= 1' 'select * from pgbench_tellers where bid <= 1' 'select * from pgbench_history where bid <= 1'; do
      psql '$H dbname=subset_s100' -qAtX -c \"copy (\$q) to stdout\"; done | zstd -q -1 > $out/raw2.zst; wait"
done
$B list $out/sub.pgs 2>&1 | grep -i subset | head -3
echo "kept rows in the source: accounts $(rows subset_s100 'select count(*) from pgbench_accounts where bid<=1'), history $(rows subset_s100 'select count(*) from pgbench_history where bid<=1')"
echo -n "whole dump -j2 of the same database (context): "; t $B dump -d "$H dbname=subset_s100" -f $out/whole.pgs -j 2 -q --overwrite
echo
fi

if has fk; then
echo "## subset: 1% of the FK-heavy dataset (fk_t02 id <= 700, children), $(date -u +%FT%TZ)"
sub=(--subset 'public.fk_t02: id <= 700' --subset-children)
$B dump -d "$H dbname=fkheavy_4" -f $out/fksub.pgs -j 2 -q --overwrite "${sub[@]}" || exit 1
# The comparison reads the same rows by primary key: the subset is
# restored into a scratch database, and each table's kept ids become one
# COPY (SELECT * ... WHERE id = ANY (ids)) against the source.
psql "$H dbname=postgres" -qAtX -c "DROP DATABASE IF EXISTS fkheavy_sub_scratch" -c "CREATE DATABASE fkheavy_sub_scratch"
$B restore -d "$H dbname=fkheavy_sub_scratch" -j 2 -q -f $out/fksub.pgs || exit 1
: > $out/fkraw.sql; kept=0
for tb in $(rows fkheavy_sub_scratch "select relname from pg_class where relname ~ '^fk_t[0-9]+$' order by 1"); do
  ids=$(rows fkheavy_sub_scratch "select coalesce(string_agg(id::text, ',' order by id), '') from $tb")
  n=$(rows fkheavy_sub_scratch "select count(*) from $tb"); kept=$((kept + n))
  [ -n "$ids" ] && echo "COPY (SELECT * FROM $tb WHERE id = ANY ('{$ids}'::bigint[])) TO STDOUT;" >> $out/fkraw.sql
done
echo "kept rows: $kept of $(rows fkheavy_4 'select sum(n_live_tup) from pg_stat_user_tables')"
for r in $(seq $ROUNDS); do
  echo "round $r"
  echo -n "  pgsprint dump --subset -j2: "; t $B dump -d "$H dbname=fkheavy_4" -f $out/fksub.pgs -j 2 -q --overwrite "${sub[@]}"
  echo -n "  raw COPY of the kept rows by primary key (one query per table, to zstd): "; t bash -c "psql '$H dbname=fkheavy_4' -qAtX -f $out/fkraw.sql | zstd -q -1 > $out/fkraw.zst"
done
echo -n "whole dump -j2 of the same database (context): "; t $B dump -d "$H dbname=fkheavy_4" -f $out/fkwhole.pgs -j 2 -q --overwrite
psql "$H dbname=postgres" -qAtX -c "DROP DATABASE IF EXISTS fkheavy_sub_scratch"
echo
fi

if has mask; then
for tb in people people_real; do
  echo "## masking: email, full_name, phone of mask_1g.$tb, dump -t -j2, $(date -u +%FT%TZ)"
  for r in $(seq $ROUNDS); do
    echo "round $r"
    echo -n "  unmasked: "; t $B dump -d "$H dbname=mask_1g" -t public.$tb -f $out/plain.pgs -j 2 -q --overwrite
    echo -n "  masked:   "; t $B dump -d "$H dbname=mask_1g" -t public.$tb -f $out/masked.pgs -j 2 -q --overwrite --mask-secret-file $secret \
       --mask public.$tb.email=email --mask public.$tb.full_name=name --mask public.$tb.phone=phone
  done
  ls -l $out/plain.pgs $out/masked.pgs | awk '{print "  ", $5, $9}'
done
fi
