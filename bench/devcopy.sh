#!/bin/bash
# Issue 32's measurements (docs/BENCHMARKS.md, "Twelfth session"): a 1% subset
# of pgbench s100 with its foreign keys (database subset_s100) against a raw
# COPY of the same rows, and masking three text columns of a 1 GB table
# (mask_1g.people) against the unmasked dump, three rounds each, wall seconds.
# SERVER is a keyword connection string without dbname, PGSPRINT the binary,
# OUT a scratch directory. The databases, as they were made:
#   subset_s100: pgbench -i -s 100, then ALTER TABLE ... ADD FOREIGN KEY for
#     tellers(bid), accounts(bid), history(bid, tid, aid), and 1,000,000
#     history rows (aid spread over all accounts, bid and tid to match);
#   mask_1g: people(id bigint primary key, email, full_name, phone, city text,
#     signup date), 8,000,000 generated rows.
set -u
B=${PGSPRINT:-pgsprint}
H="${SERVER:-host=/work/scale-pg port=45432 user=postgres}"
out=${OUT:-/tmp/pgsprint-devcopy}; mkdir -p $out
secret=$out/secret; echo "bench-secret-$$" > $secret; chmod 600 $secret
t() { local s=$(date +%s.%N); "$@" > $out/last.log 2>&1; local rc=$?; local e=$(date +%s.%N); printf "%.2f rc=%d\n" $(echo "$e-$s"|bc) $rc; }
rows() { psql "$H dbname=$1" -qAtX -c "$2"; }
echo "## subset: 1% of pgbench s100 (branches bid <= 1, children), $(date -u +%FT%TZ)"
for r in 1 2 3; do
  echo "round $r"
  echo -n "  pgsprint dump --subset -j2: "; t $B dump -d "$H dbname=subset_s100" -f $out/sub.pgs -j 2 -q --overwrite --subset 'public.pgbench_branches: bid <= 1' --subset-children
  echo -n "  raw COPY of the kept rows (4 queries, sequential, to zstd): "; t bash -c "
    for q in 'select * from pgbench_branches where bid <= 1' 'select * from pgbench_tellers where bid <= 1' 'select * from pgbench_accounts where bid <= 1' 'select * from pgbench_history where bid <= 1'; do
      psql '$H dbname=subset_s100' -qAtX -c \"copy (\$q) to stdout\"; done | zstd -q -3 > $out/raw.zst"
  echo -n "  raw COPY, 2 at once (accounts | the rest): "; t bash -c "
    psql '$H dbname=subset_s100' -qAtX -c 'copy (select * from pgbench_accounts where bid <= 1) to stdout' | zstd -q -3 > $out/raw1.zst &
    for q in 'select * from pgbench_branches where bid <= 1' 'select * from pgbench_tellers where bid <= 1' 'select * from pgbench_history where bid <= 1'; do
      psql '$H dbname=subset_s100' -qAtX -c \"copy (\$q) to stdout\"; done | zstd -q -3 > $out/raw2.zst; wait"
done
$B list $out/sub.pgs 2>&1 | head -20
echo "kept rows in the source: accounts $(rows subset_s100 'select count(*) from pgbench_accounts where bid<=1'), history $(rows subset_s100 'select count(*) from pgbench_history where bid<=1')"
echo -n "whole dump -j2 of the same database (context): "; t $B dump -d "$H dbname=subset_s100" -f $out/whole.pgs -j 2 -q --overwrite
ls -la $out/*.pgs $out/*.zst
echo
echo "## masking: email, full_name, phone of mask_1g.people (1 GB, 8M rows), dump -t -j2, $(date -u +%FT%TZ)"
for r in 1 2 3; do
  echo "round $r"
  echo -n "  unmasked: "; t $B dump -d "$H dbname=mask_1g" -t public.people -f $out/plain.pgs -j 2 -q --overwrite
  echo -n "  masked:   "; t $B dump -d "$H dbname=mask_1g" -t public.people -f $out/masked.pgs -j 2 -q --overwrite --mask-secret-file $secret \
     --mask public.people.email=email --mask public.people.full_name=name --mask public.people.phone=phone
done
ls -la $out/plain.pgs $out/masked.pgs
