#!/bin/sh
# test-cpu.sh: where make test's CPU goes. Runs every test one at a time
# (go test -p 1 -parallel 1, as make test's environment) while sampling the
# machine's busy CPU from /proc/stat, then prints the CPU-seconds of each
# package and of the N costliest tests (default 40). On 2 cores make test is
# CPU-bound (no core idle), so its wall time is about the sum printed here
# (plus the build) over the cores: this is the list to cut from. A test's
# CPU includes its subtests'; the costliest subtests are listed on their
# own after it.
#
# The machine must be otherwise idle: everything it does counts. Takes
# about 12 minutes on 2 cores.
#
#   scripts/test-cpu.sh [N] [packages...]      e.g. scripts/test-cpu.sh 20 ./cmd/pgsprint
set -eu
top=${1:-40}
[ $# -gt 0 ] && shift
[ $# -eq 0 ] && set -- ./...
out=$(mktemp -d)
trap 'kill $sampler 2>/dev/null || true; rm -rf "$out"' EXIT
(while :; do
	# user nice system irq softirq steal, in clock ticks
	awk -v t="$(date +%s.%N)" 'NR == 1 { print t, $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
	sleep 0.25
done) >"$out/stat" &
sampler=$!
PGSPRINT_TEST_REQUIRE_PG=1 PGSPRINT_TEST_PG_VERSIONS=${TEST_PG_VERSIONS:-13,15,18} \
	go test -json -count=1 -p 1 -parallel 1 -timeout 60m "$@" 2>&1 | python3 -u -c '
import json, sys, time
for line in sys.stdin:
    try:
        e = json.loads(line)
    except ValueError:
        continue
    a, test = e.get("Action"), (e.get("Test") or "").replace(" ", "_")
    if a in ("run", "cont", "pause", "pass", "fail", "skip") and test or a in ("pass", "fail") and not test:
        print("%.3f %s %s %s" % (time.time(), a if test else "pkg" + a, e.get("Package", "-"), test or "-"), flush=True)
' >"$out/events"
kill $sampler
python3 - "$out/stat" "$out/events" "$top" "$(getconf CLK_TCK)" <<'EOF'
import bisect, collections, sys
stat = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
ts, busy = [s[0] for s in stat], [s[1] for s in stat]
top, hz = int(sys.argv[3]), float(sys.argv[4])
def at(t):
    i = min(max(bisect.bisect_left(ts, t), 1), len(ts) - 1)
    t0, t1, b0, b1 = ts[i - 1], ts[i], busy[i - 1], busy[i]
    return b0 + (b1 - b0) * min(max((t - t0) / (t1 - t0), 0), 1) if t1 > t0 else b1
cpu, wall = collections.Counter(), collections.Counter()
cur, pkg, last = None, None, None
for line in open(sys.argv[2]):
    t, a, p, test = line.split()
    t = float(t)
    p = p.split("/", 3)[-1] if p.count("/") >= 3 else p
    key = cur or ((pkg, "<between tests>") if pkg else None)
    if last is not None and key:
        cpu[key] += (at(t) - at(last)) / hz
        wall[key] += t - last
    pkg = None if a.startswith("pkg") else p
    if a in ("run", "cont"):
        cur = (p, test)
    else:
        # A subtest that ends or pauses hands back to its parent, which
        # waits for it (one test at a time: nothing else runs).
        cur = (p, test.rsplit("/", 1)[0]) if "/" in test else None
    last = t
per, tops, subs = collections.Counter(), collections.Counter(), collections.Counter()
for (p, test), v in cpu.items():
    per[p] += v
    tops[(p, test.split("/")[0])] += v
    if "/" in test:
        subs[(p, test)] += v
print("%.0f CPU-seconds in %.0f s of tests, one at a time" % (sum(cpu.values()), sum(wall.values())))
print("\nCPU-s  package")
for p, v in per.most_common():
    if v >= 0.5:
        print("%6.1f  %s" % (v, p))
print("\nCPU-s  test (its subtests included)")
for (p, test), v in tops.most_common(top):
    print("%6.1f  %s %s" % (v, p, test))
print("\nCPU-s  subtest")
for (p, test), v in subs.most_common(top):
    print("%6.1f  %s %s" % (v, p, test))
EOF
