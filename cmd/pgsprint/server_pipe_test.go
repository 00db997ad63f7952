package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// pipeServerDatabases are the databases loadPipeServer fills, with their
// rows (postgres is every server's).
var pipeServerDatabases = map[string]int64{"notes": 3, "postgres": 1, "shop": 20003}

// loadPipeServer gives a cluster a role with a password and three small
// databases, one owned by that role with a table dumped in chunks and a
// foreign key.
func loadPipeServer(t *testing.T, c *pgtest.Instance) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []struct{ db, sql string }{
		{"postgres", "CREATE ROLE carol LOGIN PASSWORD 'carol-pw'"},
		{"postgres", "CREATE DATABASE shop OWNER carol"},
		{"postgres", "CREATE DATABASE notes"},
		{"postgres", "CREATE TABLE kept (id int PRIMARY KEY); INSERT INTO kept VALUES (1)"},
		{"shop", `SET ROLE carol;
			CREATE TABLE customers (id int PRIMARY KEY, name text);
			INSERT INTO customers VALUES (1, 'one'), (2, 'two'), (3, 'three');
			CREATE TABLE orders (id int PRIMARY KEY, customer int REFERENCES customers, note text);
			INSERT INTO orders SELECT g, 1 + g % 3, md5(g::text) FROM generate_series(1, 20000) g`},
		{"notes", "CREATE TABLE note (id serial PRIMARY KEY, body text); INSERT INTO note (body) VALUES ('a'), ('b'), ('c')"},
	} {
		if err := c.Exec(ctx, s.db, s.sql); err != nil {
			t.Fatalf("%s: %s: %v", s.db, s.sql, err)
		}
	}
}

// requireSameServer compares dst with src as restore --all and clone --all
// leave it: the globals (but the bootstrap superuser's password, which
// every server has its own of), and each database's pg_dump --create and
// row hashes.
func requireSameServer(t *testing.T, src, dst *pgtest.Instance) {
	t.Helper()
	bin := src.BinDir()
	want, got := pgtest.GlobalsDump(t, bin, src.ConnString("postgres")), pgtest.GlobalsDump(t, bin, dst.ConnString("postgres"))
	if pgtest.WithoutRole(got, "postgres") != pgtest.WithoutRole(want, "postgres") {
		t.Errorf("globals differ:\n%s", compare.SchemaDiff(want, got))
	}
	for db := range pipeServerDatabases {
		if d := compare.SchemaDiff(pgtest.SchemaDump(t, bin, src.ConnString(db), "--create"), pgtest.SchemaDump(t, bin, dst.ConnString(db), "--create")); d != "" {
			t.Errorf("database %s: schemas differ:\n%s", db, d)
		}
		if d := compare.FingerprintDiff(pgtest.Fingerprint(t, src.ConnString(db)), pgtest.Fingerprint(t, dst.ConnString(db))); len(d) > 0 {
			t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
		}
	}
}

// readSummary reads a --summary-json file.
func readSummary(t *testing.T, path string) progress.Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s progress.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServerPipeProgressResume moves a whole server without a file, as
// pg_dumpall | psql would: dump --all -f - | restore --all -f -, with
// JSON progress on both sides (nothing else on stderr), the restore's (one stream whose events name each database, its
// table events adding up to every row) and --summary-json (the globals and
// each database with its rows). Then clone --all is killed with SIGKILL
// once its globals are in and finished with --resume, whose summary lists
// every database, done by the killed run or by itself. Each time the
// globals, schemas and row hashes must equal the source's.
func TestServerPipeProgressResume(t *testing.T) {
	t.Parallel()
	src := pgtest.New(t)
	loadPipeServer(t, src)
	dir := t.TempDir()

	t.Run("pipe", func(t *testing.T) {
		dst := pgtest.New(t)
		sum := filepath.Join(dir, "restore.json")
		rs := runPipeline(t,
			[]string{"pgsprint", "dump", "--all", "-d", src.ConnString("postgres"), "-f", "-", "-j", "2", "--chunk-size", "256kB", "--progress=json"},
			[]string{"pgsprint", "restore", "--all", "-f", "-", "-d", dst.ConnString("postgres"), "-j", "2",
				"--progress=json", "--progress-interval", "20ms", "--summary-json", sum})
		if rs[0].code != 0 || rs[1].code != 0 {
			t.Fatalf("dump --all exit %d: %s\nrestore --all exit %d: %s", rs[0].code, rs[0].stderr, rs[1].code, rs[1].stderr)
		}
		// Both sides' stderr are JSON events, one per line, and nothing else.
		if evs := events(t, rs[0].stderr); evs[len(evs)-1].Event != "summary" {
			t.Errorf("dump --all's last event: %+v", evs[len(evs)-1])
		}
		evs := events(t, rs[1].stderr)
		phases := map[string]bool{}
		var rows, wantRows int64
		for _, e := range evs {
			switch e.Event {
			case "phase":
				phases[e.Phase] = true
			case "table":
				rows += e.Rows
				if db, _, ok := strings.Cut(e.Work.Table, ": "); !ok || pipeServerDatabases[db] == 0 {
					t.Errorf("table event without its database: %+v", e.Work)
				}
			}
		}
		for _, p := range []string{"globals", "databases", "shop: pre-data", "notes: pre-data", "postgres: data and indexes"} {
			if !phases[p] {
				t.Errorf("no phase event %q in %v", p, phases)
			}
		}
		for _, n := range pipeServerDatabases {
			wantRows += n
		}
		if rows != wantRows {
			t.Errorf("table events add up to %d rows, want %d", rows, wantRows)
		}
		last := evs[len(evs)-1]
		if last.Event != "summary" || last.Summary.Rows != wantRows || len(last.Summary.Databases) != len(pipeServerDatabases) {
			t.Errorf("last event %+v", last)
		}
		s := readSummary(t, sum)
		got := map[string]int64{}
		for _, d := range s.Databases {
			got[d.Name] = d.Rows
			if d.Done || len(d.Phases) == 0 || d.WallSeconds <= 0 {
				t.Errorf("summary of database %s: %+v", d.Name, d)
			}
		}
		if !reflect.DeepEqual(got, pipeServerDatabases) || s.Rows != wantRows || s.Globals == nil || s.Globals.Roles != 1 || !reflect.DeepEqual(s.Globals.KeptRoles, []string{"postgres"}) {
			t.Errorf("summary: %+v", s)
		}
		requireSameServer(t, src, dst)
	})

	// A cut pipe never looks finished: cut in its trailer, after every
	// stream, the databases are restored but the run fails and its
	// journal stays; cut in the middle, it fails too. The whole archive
	// with --resume then finishes it.
	t.Run("cut pipe", func(t *testing.T) {
		dst := pgtest.New(t)
		conn, err := pgx.Connect(context.Background(), dst.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		file := filepath.Join(dir, "server.pgs")
		mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file, "-j", "2", "--chunk-size", "256kB")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"restore", "--all", "-f", "-", "-d", dst.ConnString("postgres"), "-j", "2"}
		for _, cut := range []struct {
			name string
			n    int
			want string
		}{
			{"trailer", len(data) - 4, fmt.Sprintf("archive on standard input is incomplete: the input ended after %d bytes, before the archive's trailer (cut off, or the dump writing it failed or is still running); the restore is not finished; run it again with --resume and a sound archive", len(data)-4)},
			{"middle", len(data) / 2, "incomplete"},
		} {
			r := pgsprintStdin(t, nil, bytes.NewReader(data[:cut.n]), append(args, "--clean")...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if last := lines[len(lines)-1]; r.code != 1 || !strings.Contains(last, cut.want) {
				t.Errorf("cut in the %s: exit %d, want 1 and %q:\n%s", cut.name, r.code, cut.want, r.stderr)
			}
			if !markerRole(conn) {
				t.Errorf("cut in the %s: the run looks finished (no journal left)", cut.name)
			}
		}
		r := pgsprintStdin(t, nil, bytes.NewReader(data), append(args, "--resume")...)
		if r.code != 0 {
			t.Fatalf("--resume: exit %d:\n%s", r.code, r.stderr)
		}
		if markerRole(conn) {
			t.Error("the whole-server journal outlived the completed restore")
		}
		requireSameServer(t, src, dst)
	})

	t.Run("clone resume", func(t *testing.T) {
		dst := pgtest.New(t)
		conn, err := pgx.Connect(context.Background(), dst.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		_, rng := killLoop(t, "", 1)
		args := []string{"clone", "--all", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"), "-j", "2", "--chunk-size", "256kB"}
		cmd, exited := startUntilGlobals(t, conn, args...)
		select {
		case <-exited:
			// Nothing is left to resume: a second run would be refused.
			t.Log("the clone finished before the kill")
			requireSameServer(t, src, dst)
			return
		case <-time.After(time.Duration(rng.Int64N(int64(500 * time.Millisecond)))):
			cmd.Process.Kill()
			<-exited
			// Started again without --resume, it is refused in one line.
			// (Its warnings about the killed run's temporary files apart.)
			r := pgsprint(t, nil, args...)
			msg := strings.TrimSpace(regexp.MustCompile(`(?m)^.*removed a stale temporary file.*\n`).ReplaceAllString(r.stderr, ""))
			if r.code != 1 || !strings.Contains(msg, "holds an unfinished clone --all of this source: finish it with --resume") || strings.Count(msg, "\n") != 0 {
				t.Errorf("clone --all over an unfinished one: exit %d, want 1 and one line:\n%s", r.code, r.stderr)
			}
		}
		sum := filepath.Join(dir, "clone.json")
		r := mustPgsprint(t, append(args, "--resume", "--summary-json", sum)...)
		t.Log(r.stderr)
		s := readSummary(t, sum)
		var names []string
		for _, d := range s.Databases {
			names = append(names, d.Name)
			if !d.Done && d.Rows != pipeServerDatabases[d.Name] {
				t.Errorf("database %s: %d rows cloned, want %d", d.Name, d.Rows, pipeServerDatabases[d.Name])
			}
			if !d.Done && !strings.Contains(r.stderr, "database "+d.Name+": ") {
				t.Errorf("no line for database %s:\n%s", d.Name, r.stderr)
			}
		}
		if !reflect.DeepEqual(names, []string{"notes", "postgres", "shop"}) {
			t.Errorf("summary lists databases %v", names)
		}
		if markerRole(conn) {
			t.Error("the whole-server journal outlived the completed clone")
		}
		requireSameServer(t, src, dst)
		for db := range pipeServerDatabases {
			c, err := pgx.Connect(context.Background(), dst.ConnString(db))
			if err != nil {
				t.Fatal(err)
			}
			requireNoJournal(t, c)
			c.Close(context.Background())
		}
	})
}
