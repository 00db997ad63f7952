package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspect covers the commands that read without writing: list, verify
// and compare, on a sound archive and on damaged or different inputs.
func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	for _, db := range []string{"src", "dst"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Exec(ctx, "src", `CREATE SCHEMA "Odd ""s"""; CREATE TABLE "Odd ""s""".t (id int PRIMARY KEY, v text);
INSERT INTO "Odd ""s""".t SELECT i, md5(i::text) FROM generate_series(1, 54321) i;
CREATE TABLE other (x int); INSERT INTO other VALUES (1), (2), (3);`)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "src.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", file, "-q")

	t.Run("list", func(t *testing.T) {
		out := mustPgsprint(t, "list", file).stdout
		for _, want := range []string{`"Odd ""s"""."t"`, "54321", `"public"."other"`, "zstd", "2 tables"} {
			if !strings.Contains(out, want) {
				t.Errorf("list output lacks %q:\n%s", want, out)
			}
		}
		var l listing
		if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil {
			t.Fatal(err)
		}
		rows := map[string]int64{}
		for _, tb := range l.Tables {
			rows[tb.Schema+"."+tb.Name] = tb.Rows
		}
		if rows[`Odd "s".t`] != 54321 || rows["public.other"] != 3 || l.Manifest.Database != c.Name("src") {
			t.Errorf("list --json: rows %v, database %q", rows, l.Manifest.Database)
		}
	})

	t.Run("verify", func(t *testing.T) {
		if out := mustPgsprint(t, "verify", file).stdout; !strings.Contains(out, "sound") || !strings.Contains(out, "54324 rows") {
			t.Errorf("verify output: %s", out)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x40
		bad := filepath.Join(dir, "bad.pgs")
		if err := os.WriteFile(bad, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "verify", bad)
		if r.code != exitFailure || !strings.Contains(r.stderr, "archive on "+bad+" is damaged: ") {
			t.Errorf("verify of a damaged archive: exit %d, stderr %s", r.code, r.stderr)
		}
		if r := pgsprint(t, nil, "verify", filepath.Join(dir, "missing.pgs")); r.code != exitFailure {
			t.Errorf("verify of a missing file: exit %d", r.code)
		}
		// From a pipe: every frame checked as it passes, then the
		// manifest against the streams read.
		good, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer good.Close()
		clean, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if r := pgsprintStdin(t, nil, good, "verify", "-"); r.code != 0 || !strings.Contains(r.stdout, "sound") || !strings.Contains(r.stdout, "54324 rows") {
			t.Errorf("verify - of a sound archive: exit %d, %s%s", r.code, r.stdout, r.stderr)
		}
		for _, in := range []struct {
			name string
			data []byte
			want string
		}{
			{"damaged", data, "archive on standard input is damaged: "},
			{"truncated", clean[:len(clean)-100], "incomplete"},
		} {
			r := pgsprintStdin(t, nil, bytes.NewReader(in.data), "verify", "-")
			if r.code != exitFailure || !strings.Contains(r.stderr, in.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("verify - of a %s archive: exit %d, stderr %s", in.name, r.code, r.stderr)
			}
		}
	})

	t.Run("compare", func(t *testing.T) {
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("dst"), "-q")
		out := mustPgsprint(t, "compare", "--source", c.ConnString("src"), "--target", c.ConnString("dst"), "--schema", "-j", "2").stdout
		if !strings.Contains(out, "2 of 2 objects equal") || !strings.Contains(out, "schema: equal") {
			t.Errorf("compare of equal databases:\n%s", out)
		}
		if err := c.Exec(ctx, "dst", `DELETE FROM other WHERE x = 2; COMMENT ON TABLE other IS 'changed'`); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "compare", "--source", c.ConnString("src"), "--target", c.ConnString("dst"), "--schema")
		if r.code != exitFailure || !strings.Contains(r.stdout, `DIFFERENT: public.other`) || !strings.Contains(r.stdout, "schema differs") {
			t.Errorf("compare of different databases: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
}
