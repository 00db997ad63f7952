package compare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// maxDiffLines bounds the diff printed by the callers: the first few
// differences explain a failure, thousands of lines bury it.
const maxDiffLines = 80

// SchemaDump returns `pg_dump --schema-only` (owners and privileges kept) of
// the database connString points at, run with the pg_dump in binDir, with the
// lines that legitimately differ between two databases normalized:
//
//   - `\restrict KEY` / `\unrestrict KEY` (pg_dump 15.14+, 16.10+, 17.6+, 18+)
//     carry a random key per run; the key becomes "KEY".
//   - "-- Dumped from database version ..." / "-- Dumped by pg_dump version
//     ..." lose their version, so dumps from different minor versions compare.
//   - `\connect ...` becomes `\connect DBNAME`, and the database's own name in
//     CREATE/ALTER/COMMENT ON/GRANT/REVOKE/SECURITY LABEL ... DATABASE lines
//     and in the "-- Name: ...; Type: DATABASE" headers becomes DBNAME.
//
// pg_dump inherits the environment, so PGPASSWORD or a passfile can supply a
// password for TCP connection strings.
func SchemaDump(ctx context.Context, binDir, connString string, selection ...string) (string, error) {
	cfg, err := pg.ConnOptions{DSN: connString}.Config()
	if err != nil {
		return "", err
	}
	dsn, env := pg.ChildConn(cfg)
	enc, err := dumpEncoding(ctx, cfg)
	if err != nil {
		return "", err
	}
	args := append([]string{"--schema-only", "--no-password", "--encoding=" + enc, "--dbname=" + dsn}, selection...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_dump"), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pg_dump --schema-only of %q: %s", cfg.Database, pg.ToolError(stderr.Bytes(), err))
	}
	return NormalizeSchemaDump(stdout.String(), cfg.Database), nil
}

// dumpEncoding is the encoding SchemaDump has pg_dump write in: UTF8, so
// that databases of different encodings holding the same text dump the
// same, except for a SQL_ASCII database, whose bytes (not necessarily
// UTF8) only pass unconverted.
func dumpEncoding(ctx context.Context, cfg *pgx.ConnConfig) (string, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if conn.PgConn().ParameterStatus("server_encoding") == "SQL_ASCII" {
		return "SQL_ASCII", nil
	}
	return "UTF8", nil
}

// NormalizeSchemaDump applies SchemaDump's normalization to the text of a
// plain-format pg_dump of database dbName. It is exported for tests that run
// pg_dump themselves (e.g. with --create, or on a restored custom archive).
func NormalizeSchemaDump(dump, dbName string) string {
	quoted := pg.Ident(dbName)
	names := []string{quoted, dbName}
	lines := strings.Split(dump, "\n")
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, `\restrict `):
			lines[i] = `\restrict KEY`
		case strings.HasPrefix(line, `\unrestrict `):
			lines[i] = `\unrestrict KEY`
		case strings.HasPrefix(line, "-- Dumped from database version "):
			lines[i] = "-- Dumped from database version VERSION"
		case strings.HasPrefix(line, "-- Dumped by pg_dump version "):
			lines[i] = "-- Dumped by pg_dump version VERSION"
		case strings.HasPrefix(line, `\connect `):
			lines[i] = `\connect DBNAME`
		case strings.HasPrefix(line, "-- Name: "+dbName+"; Type: DATABASE;"):
			lines[i] = "-- Name: DBNAME; Type: DATABASE;" + strings.TrimPrefix(line, "-- Name: "+dbName+"; Type: DATABASE;")
		case strings.Contains(line, "DATABASE "):
			lines[i] = replaceDBName(line, names)
		}
	}
	return strings.Join(lines, "\n")
}

// replaceDBName replaces the identifier that directly follows each
// "DATABASE " in line, when it is the database's own name (quoted or bare)
// followed by a delimiter, with DBNAME.
func replaceDBName(line string, names []string) string {
	var b strings.Builder
	rest := line
	for {
		i := strings.Index(rest, "DATABASE ")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i+len("DATABASE ")])
		rest = rest[i+len("DATABASE "):]
		for _, n := range names {
			if n == "" || !strings.HasPrefix(rest, n) {
				continue
			}
			after := rest[len(n):]
			if after == "" || strings.ContainsAny(after[:1], " ;,") {
				b.WriteString("DBNAME")
				rest = after
				break
			}
		}
	}
}

// SchemaDiff returns a unified-style diff of a and b (at most maxDiffLines
// lines, first differences first), or "" when they are equal. It is exported
// so tests can assert that two dumps do differ.
func SchemaDiff(a, b string) string {
	if a == b {
		return ""
	}
	al := strings.Split(a, "\n")
	bl := strings.Split(b, "\n")
	// Trim the common prefix and suffix; pg_dump output is mostly equal.
	pre := 0
	for pre < len(al) && pre < len(bl) && al[pre] == bl[pre] {
		pre++
	}
	suf := 0
	for suf < len(al)-pre && suf < len(bl)-pre && al[len(al)-1-suf] == bl[len(bl)-1-suf] {
		suf++
	}
	ma := al[pre : len(al)-suf]
	mb := bl[pre : len(bl)-suf]

	ops := diffOps(ma, mb)
	const ctxLines = 3
	var out []string
	start := pre - ctxLines
	if start < 0 {
		start = 0
	}
	out = append(out, fmt.Sprintf("@@ -%d +%d @@ (first difference at line %d)", start+1, start+1, pre+1))
	for _, l := range al[start:pre] {
		out = append(out, "  "+l)
	}
	for _, op := range ops {
		out = append(out, op)
		if len(out) >= maxDiffLines {
			out = append(out, "... (diff truncated)")
			return strings.Join(out, "\n")
		}
	}
	end := len(al) - suf + ctxLines
	if end > len(al) {
		end = len(al)
	}
	for _, l := range al[len(al)-suf : end] {
		out = append(out, "  "+l)
	}
	return strings.Join(out, "\n")
}

// diffOps returns the middle region's lines prefixed "  ", "- " or "+ ",
// using an LCS when the region is small enough and a plain
// all-removed/all-added listing otherwise. Long runs of equal lines are
// collapsed.
func diffOps(a, b []string) []string {
	const maxCells = 4_000_000
	if len(a)*len(b) > maxCells {
		var out []string
		for _, l := range a {
			out = append(out, "- "+l)
		}
		for _, l := range b {
			out = append(out, "+ "+l)
		}
		return out
	}
	n, m := len(a), len(b)
	lcs := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return lcs[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				lcs[i*(m+1)+j] = at(i+1, j+1) + 1
			case at(i+1, j) >= at(i, j+1):
				lcs[i*(m+1)+j] = at(i+1, j)
			default:
				lcs[i*(m+1)+j] = at(i, j+1)
			}
		}
	}
	var out, equal []string
	flush := func() {
		if len(equal) > 6 {
			out = append(out, equal[:3]...)
			out = append(out, fmt.Sprintf("  ... (%d equal lines)", len(equal)-6))
			out = append(out, equal[len(equal)-3:]...)
		} else {
			out = append(out, equal...)
		}
		equal = equal[:0]
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			equal = append(equal, "  "+a[i])
			i++
			j++
		case i < n && (j == m || at(i+1, j) >= at(i, j+1)):
			flush()
			out = append(out, "- "+a[i])
			i++
		default:
			flush()
			out = append(out, "+ "+b[j])
			j++
		}
	}
	flush()
	return out
}
