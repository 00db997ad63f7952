package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// pipeServerDatabases are pgtest.PipeServerDatabases.
var pipeServerDatabases = pgtest.PipeServerDatabases

// loadPipeServer is pgtest.LoadPipeServer.
func loadPipeServer(t *testing.T, c *pgtest.Instance) { pgtest.LoadPipeServer(t, c) }

// requireSameServer is pgtest.RequireSameServer of pipeServerDatabases.
func requireSameServer(t *testing.T, src, dst *pgtest.Instance) {
	t.Helper()
	pgtest.RequireSameServer(t, src, dst, pipeServerDatabases)
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
// each database with its rows). Then (under make test-long; make test
// kills and resumes clone --all in TestAllProgress) clone --all is killed
// with SIGKILL once its globals are in, refused when started again
// without --resume, and finished with --resume, whose summary lists every
// database, done by the killed run or by itself. Each time the globals,
// schemas and row hashes must equal the source's. A cut pipe is
// internal/cluster's TestServerCutPipe.
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

	t.Run("clone resume", func(t *testing.T) {
		if !long {
			t.Skip("under make test-long only: TestAllProgress kills and resumes clone --all")
		}
		dst := pgtest.New(t)
		conn, err := pgx.Connect(context.Background(), dst.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		_, rng := pgtest.Seeded(t, "", 1)
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
