#!/bin/sh
# check-doc-names.sh: the names of code that the docs (docs/*.md,
# docs/guide/*.md and README.md: in backquotes and in fenced blocks) and the package comments
# of the Go files give (pkg.Name, Type.Method, (*T).M, camelCase
# identifiers, TestX, x.go, internal/x, the flags of a `pgsprint ...`
# command line) still exist in the tree, so that a rename cannot leave a
# doc naming what is gone. Prints file:line: name (why) for each stale
# one and exits 1 if there is any. Every relative link of those docs
# ([text](path), [text](path#anchor), [text](#anchor)) must reach a file
# or directory of the tree, and its anchor a heading of the Markdown file
# it names (GitHub's slug: lower case, punctuation dropped, spaces as
# hyphens). README.md stays within 250 lines. No exported type name is
# declared by two packages unless listed as a true twin (twins below).
# Run by `make vet`.
#
# What it knows of the code is every identifier token of every .go file
# (comments left out), per directory, and the types declared: lenient (a
# name used anywhere counts), so what it reports is stale or a typo. A
# dotted name is checked when its first part is a package of the tree, or
# looks like a Go name (a package name that no longer exists is reported).
# Names of other programs' flags and objects that look like Go are listed
# in the allow list below.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Names in docs that are not this tree's code: PostgreSQL's, other tools',
# words that only look like identifiers.
allow='PostgreSQL MySQL GitHub GiB MiB KiB TiB OpenSSL JavaScript macOS
processSQLNamePattern AbortIncompleteMultipartUpload dtGvp runX
bench/out mydb.app.orders'

if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -co --exclude-standard >"$tmp/files"
else
	find . -type f | sed 's|^\./||' >"$tmp/files"
fi
grep '\.go$' "$tmp/files" >"$tmp/gofiles" || true

# Every identifier token outside comments, as "dir token"; the types
# declared; the flags cmd/pgsprint defines.
xargs awk '
FNR == 1 { d = FILENAME; sub(/\/[^\/]*$/, "", d); if (d == FILENAME) d = "."; incomment = 0 }
{
	line = $0; out = ""; n = length(line); q = ""
	for (i = 1; i <= n; i++) {
		c = substr(line, i, 1)
		if (incomment) { if (c == "*" && substr(line, i + 1, 1) == "/") { incomment = 0; i++ }; continue }
		if (q != "") { if (c == "\\" && q == "\"") { i++; continue }; if (c == q) q = ""; out = out c; continue }
		if (c == "/" && substr(line, i + 1, 1) == "/") break
		if (c == "/" && substr(line, i + 1, 1) == "*") { incomment = 1; i++; continue }
		if (c == "\"" || c == "`" || c == "\047") q = c
		out = out c
	}
	if (match(out, /type [A-Za-z_][A-Za-z0-9_]*/)) print substr(out, RSTART + 5, RLENGTH - 5) >> "'"$tmp"'/types"
	if (match(out, /^(import )?[ \t]*([a-z]+ )?"[^"]+"$/)) { p = out; sub(/"$/, "", p); sub(/.*[\/"]/, "", p); print p >> "'"$tmp"'/imports" }
	t = out
	while (match(t, /[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*/)) { print substr(t, RSTART, RLENGTH) >> "'"$tmp"'/dotted"; t = substr(t, RSTART + RLENGTH) }
	m = split(out, w, /[^A-Za-z0-9_]+/)
	for (j = 1; j <= m; j++) if (w[j] ~ /^[A-Za-z_]/) print d, w[j]
}' <"$tmp/gofiles" | sort -u >"$tmp/tokens"
cut -d' ' -f2 "$tmp/tokens" | sort -u >"$tmp/idents"
for w in $allow; do echo "$w"; done >>"$tmp/idents"
sort -u "$tmp/types" -o "$tmp/types"
sort -u "$tmp/dotted" -o "$tmp/dotted"
sort -u "$tmp/imports" -o "$tmp/imports"
# Packages by the last element of their directory (bench's dump and
# restore share internal's names: a name in either counts).
cut -d' ' -f1 "$tmp/tokens" | sort -u >"$tmp/dirs"
ls cmd/pgsprint/*.go | grep -v '_test\.go$' | xargs grep -ho '"[a-z][a-z0-9-]*"' | tr -d '"' | sort -u >"$tmp/flags"

# The text to check: backquoted spans of the docs (fenced blocks left
# out), and the package comments of the Go files (the comment just above
# their package clause), as "file:line<TAB>text".
for f in docs/*.md docs/guide/*.md README.md; do
	[ -f "$f" ] || continue
	awk -v f="$f" '
	/^[ \t]*```/ { fence = !fence; next }
	fence { print f ":" FNR "\tGO " $0; next } # diagrams: read as Go comments are
	{
		s = $0
		while (match(s, /`[^`]+`/)) {
			print f ":" FNR "\t" substr(s, RSTART + 1, RLENGTH - 2)
			s = substr(s, RSTART + RLENGTH)
		}
	}' "$f"
done >"$tmp/spans"
grep -v '_test\.go$' "$tmp/gofiles" | xargs awk '
FNR == 1 { n = 0 }
/^\/\// { buf[++n] = FNR "\t" substr($0, 3); next }
/^package / { for (i = 1; i <= n; i++) { split(buf[i], p, "\t"); print FILENAME ":" p[1] "\tGO " substr(buf[i], length(p[1]) + 2) }; nextfile }
{ n = 0 }' >>"$tmp/spans"

# Each candidate name in each span, checked.
awk -F'\t' -v tmp="$tmp" '
BEGIN {
	while ((getline l < (tmp "/tokens")) > 0) { split(l, p, " "); intok[p[1] SUBSEP p[2]] = 1 }
	while ((getline l < (tmp "/dirs")) > 0) { base = l; sub(/.*\//, "", base); pkgdir[base] = pkgdir[base] " " l }
	while ((getline l < (tmp "/idents")) > 0) ident[l] = 1
	while ((getline l < (tmp "/types")) > 0) typ[l] = 1
	while ((getline l < (tmp "/files")) > 0) { file[l] = 1; b = l; sub(/.*\//, "", b); fbase[b] = 1; while (sub(/\/[^\/]*$/, "", l)) dir[l] = 1 }
	while ((getline l < (tmp "/flags")) > 0) flag[l] = 1
	while ((getline l < (tmp "/dotted")) > 0) dotted[l] = 1
	while ((getline l < (tmp "/imports")) > 0) imported[l] = 1
	prog["pg_dump"] = prog["pg_restore"] = prog["pg_dumpall"] = prog["psql"] = prog["pgcopydb"] = prog["initdb"] = prog["pg_ctl"] = prog["pg_basebackup"] = prog["pg_upgrade"] = 1
}
function bad(where, name, why) { if (!((where SUBSEP name) in seen)) { seen[where SUBSEP name] = 1; printf "%s: %s (%s)\n", where, name, why; nbad++ } }
function inpkg(pkg, name,   ds, k, nd) {
	nd = split(pkgdir[pkg], ds, " ")
	for (k = 1; k <= nd; k++) if ((ds[k] SUBSEP name) in intok) return 1
	return 0
}
function gobased(s) { return s ~ /^[A-Za-z][A-Za-z0-9]*$/ }
function camel(s) { return s ~ /^[a-z]+[A-Z][A-Za-z0-9]*$/ || s ~ /^[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$/ }
{
	where = $1; text = $2; go = 0
	if (substr(text, 1, 3) == "GO ") { go = 1; text = substr(text, 4) }
	split(text, first, /[ \t]+/)
	if (!go && (first[1] in prog)) next
	s = text
	# Paths and file names.
	while (match(s, /[A-Za-z0-9_\/.-]*[A-Za-z0-9_]\.go([^A-Za-z0-9_]|$)/)) {
		n = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
		sub(/[^A-Za-z0-9_]$/, "", n); sub(/^[.\/]+/, "", n)
		if (n == "_test.go") continue
		b = n; sub(/.*\//, "", b)
		if (index(n, "/")) { ok = 0; for (f in file) if (f == n || substr(f, length(f) - length(n)) == "/" n) { ok = 1; break } ; if (!ok) bad(where, n, "no such file") }
		else if (!(b in fbase)) bad(where, n, "no such file")
	}
	if (!go) {
		s = text
		while (match(s, /(^|[^A-Za-z0-9_\/.-])(internal|cmd|bench|scripts)\/[A-Za-z0-9_\/.-]*[A-Za-z0-9_]/)) {
			n = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
			sub(/^[^A-Za-z]/, "", n)
			if (!(n in dir) && !(n in file) && !(n in ident)) bad(where, n, "no such path")
		}
		s = text
		if (first[1] == "pgsprint") # a bare --flag may be pg_dump one
			while (match(s, /(^|[ (])--[a-z][a-z0-9-]*/)) {
				n = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
				sub(/^[ (]?--/, "", n)
				if (!(n in flag)) bad(where, "--" n, "no such pgsprint flag")
			}
	}
	# Go names: dotted ((*T).M read as T.M), TestX, camelCase.
	s = text
	gsub(/\(\*/, "", s)
	gsub(/\)\./, ".", s)
	while (match(s, /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+/)) {
		n = substr(s, RSTART, RLENGTH); pre = RSTART > 1 ? substr(s, RSTART - 1, 1) : ""; post = substr(s, RSTART + RLENGTH, 1)
		s = substr(s, RSTART + RLENGTH)
		if (pre ~ /[\/.$:@-]/ || post ~ /[\/.-]/) continue # URLs, paths, hosts
		if (n in ident) continue # allowed
		k = split(n, part, ".")
		if (part[k] ~ /^(go|md|sh|sql|pgs|jsonl|dump|txt|csv|json|html|svg|gz|zst|lz4|tar|yml|yaml|pgsprint|conf|log|mod|sum)$/) continue
		if (part[1] in pkgdir && part[1] ~ /^[a-z][a-z0-9]*$/) {
			if (!inpkg(part[1], part[2])) bad(where, n, "not in package " part[1])
			for (j = 3; j <= k; j++) if (!(part[j] in ident)) bad(where, n, part[j] " is nowhere in the code")
			continue
		}
		if (!gobased(part[1]) || !gobased(part[2])) continue
		if ((part[1] in imported) || ((part[1] "." part[2]) in dotted)) continue # another module, or as the code says it
		if (!(part[1] in typ) && !(part[1] in ident)) {
			if (part[1] ~ /^[a-z]+$/ && !go) bad(where, n, "no package or type " part[1])
			else if (camel(part[1]) || part[1] ~ /^[A-Z]/) bad(where, n, part[1] " is nowhere in the code")
			continue
		}
		if (part[1] ~ /^[a-z]+$/ && !(part[1] in typ)) { # a package gone, or a variable (opts.Jobs)
			if (!go) bad(where, n, "no package or type " part[1])
			continue
		}
		for (j = 2; j <= k; j++) if (!(part[j] in ident)) bad(where, n, part[j] " is nowhere in the code")
	}
	s = text
	while (match(s, /[A-Za-z0-9_.]*[A-Za-z0-9_]/)) {
		n = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
		if (index(n, ".")) continue
		if (n ~ /^Test[A-Z]/ || (camel(n) && !go) || (go && n ~ /^[a-z]+[A-Z][A-Za-z0-9]*$/)) if (!(n in ident)) bad(where, n, "nowhere in the code")
	}
}
END { if (nbad) { printf "check-doc-names: %d stale names above (fix the docs, or list a foreign name in scripts/check-doc-names.sh)\n", nbad > "/dev/stderr"; exit 1 } }' "$tmp/spans" || status=1

# Relative links, and the anchors they name, resolved.
for f in docs/*.md docs/guide/*.md README.md; do
	[ -f "$f" ] && echo "$f"
done | awk -v tmp="$tmp" '
function slug(h) { h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h); return h }
function anchors(f,   l, fence, a) { # the slugs of the headings of f, once
	if (f in read) return
	read[f] = 1
	fence = 0
	while ((getline l < f) > 0) {
		if (l ~ /^[ \t]*```/) { fence = !fence; continue }
		if (!fence && l ~ /^#+ /) { sub(/^#+ +/, "", l); a = slug(l); if ((f SUBSEP a) in anchor) { n[f SUBSEP a]++; a = a "-" n[f SUBSEP a] }; anchor[f SUBSEP a] = 1 }
	}
	close(f)
}
function exists(p) { return system("test -e \"" p "\"") == 0 }
function norm(p,   parts, k, i, out, m) { # a/b/../c -> a/c
	k = split(p, parts, "/"); m = 0
	for (i = 1; i <= k; i++) {
		if (parts[i] == "." || parts[i] == "") continue
		if (parts[i] == ".." && m > 0 && out[m] != "..") { m--; continue }
		out[++m] = parts[i]
	}
	p = ""; for (i = 1; i <= m; i++) p = p (i > 1 ? "/" : "") out[i]
	return p == "" ? "." : p
}
{
	f = $0; dir = f; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
	fence = 0; ln = 0
	while ((getline l < f) > 0) {
		ln++
		if (l ~ /^[ \t]*```/) { fence = !fence; continue }
		if (fence) continue
		while (match(l, /\]\([^) \t]+\)/)) {
			t = substr(l, RSTART + 2, RLENGTH - 3); l = substr(l, RSTART + RLENGTH)
			if (t ~ /^[a-z]+:/) continue # http:, https:, mailto:
			path = t; frag = ""
			if (i = index(t, "#")) { path = substr(t, 1, i - 1); frag = substr(t, i + 1) }
			target = path == "" ? f : norm(dir "/" path)
			if (!exists(target)) { printf "%s:%d: %s (no such file)\n", f, ln, t; nbad++; continue }
			if (frag != "" && target ~ /\.md$/) {
				anchors(target)
				if (!((target SUBSEP frag) in anchor)) { printf "%s:%d: %s (no heading #%s in %s)\n", f, ln, t, frag, target; nbad++ }
			}
		}
	}
	close(f)
}
END { if (nbad) { printf "check-doc-names: %d broken links above\n", nbad > "/dev/stderr"; exit 1 } }' || status=1
# One name, one meaning: an exported type name declared by two packages
# (non-test files) must be a true twin, listed here as "Name: why" (a
# name ending in Options is allowed by rule: each package's options for
# its own entry point).
twins='Backend: each store backend implements store.Backend for its scheme
Instance: pgtest.Instance is an alias of pgctl.Instance
Graph: schedule.Graph is taskgraph.Graph instantiated for the restore
Task: schedule.Task is taskgraph.Task instantiated for the restore
Spec: what the user asked of that feature (mask rules, subset rules)
Resolved: what the user asked, resolved against the catalog (filter, mask)
RefusedError: input refused as a usage error (exit 2), the same role in mask and subset
Result: what a run returns, per engine (dump, restore) and per bench command
Failure: one failure of a --keep-going run, as the task graph, restore and the summary each hold it
Object: a schema or relation and its OID, live (pg) and as the manifest records it (archive)
Chunk: one range of a table, as planned (chunk) and as the manifest records it (archive)
Reader: reads its package noun (an archive, the source tables, a remote object), as io does
Writer: writes its package noun (an archive, masked rows), as io does
Source: what a restore reads, opened from a store (store.Source) and as the engine sees it (archive.Source)
S3Server: a local S3 gateway, for the tests (remotetest) and for bench, which keeps out of test packages
Selection: the part of an archive taken, as patterns (filter) and as restore --to-sql evaluates them
DatabaseSummary: one database summed, for list (archive) and for a run report (progress)
State: what a run or a follow is at, as progress and follow status read it'
grep -v '_test\.go$' "$tmp/gofiles" | xargs awk '
FNR == 1 { d = FILENAME; sub(/\/[^\/]*$/, "", d); group = 0 }
/^type \($/ { group = 1; next }
group && /^\)/ { group = 0; next }
/^type [A-Z]/ || (group && /^\t[A-Z][A-Za-z0-9_]* /) { sub(/^(type |\t)/, ""); sub(/[ \t\[].*/, ""); print $0, d }' |
	sort -u | awk -v twins="$twins" '
BEGIN { n = split(twins, l, "\n"); for (i = 1; i <= n; i++) { sub(/:.*/, "", l[i]); ok[l[i]] = 1 } }
{ pk[$1] = pk[$1] " " $2; c[$1]++ }
END {
	for (t in c) if (c[t] > 1 && !(t in ok) && t !~ /Options$/) {
		printf "type %s is declared by%s: one name, one meaning; rename one, or if they are the same thing list \"%s: why\" in twins in scripts/check-doc-names.sh\n", t, pk[t], t > "/dev/stderr"; bad++
	}
	exit bad > 0
}' || status=1
# The README is a door: the rest is in docs/guide.
if [ "$(wc -l <README.md)" -gt 250 ]; then
	echo "README.md: $(wc -l <README.md) lines, more than 250: move the detail into docs/guide" >&2
	status=1
fi
exit "${status:-0}"
