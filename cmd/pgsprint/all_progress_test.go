package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestAllProgress: restore --all and clone --all show one progress stream
// for the whole run, as a single-database run does. Each --progress=json
// stream names the database of every phase and table, its table events add
// up to the rows of every database, and its summary (the last event, and
// --summary-json) has the totals, the globals and each database. A restore
// knows the archive's totals before its first database begins: every plan
// it announces is the whole archive's. A clone --all killed with SIGKILL
// once its globals are in, refused when started again without --resume,
// and finished with --resume shows, in the same way, the databases the
// resumed run cloned, and leaves the target equal to the source.
func TestAllProgress(t *testing.T) {
	t.Parallel()
	src := pgtest.New(t)
	loadPipeServer(t, src)
	dir := t.TempDir()
	var wantRows int64
	for _, n := range pipeServerDatabases {
		wantRows += n
	}
	json := []string{"--progress=json", "--progress-interval", "10ms"}

	// checkRun checks a run's events and summary file against the rows of
	// the databases it cloned or restored (all but those done before).
	checkRun := func(t *testing.T, r serverRun, sum string) {
		t.Helper()
		want := map[string]int64{}
		for db, n := range pipeServerDatabases {
			want[db] = n
		}
		file := readSummary(t, sum)
		if !reflect.DeepEqual(file, r.summary) {
			t.Errorf("--summary-json differs from the summary event:\n%+v\n%+v", file, r.summary)
		}
		var total int64
		for _, d := range file.Databases {
			if d.Done {
				delete(want, d.Name)
				continue
			}
			total += d.Rows
			if d.Rows != want[d.Name] || len(d.Phases) == 0 || d.WallSeconds <= 0 {
				t.Errorf("summary of database %s: %+v", d.Name, d)
			}
			if !r.phases[d.Name+": data and indexes"] {
				t.Errorf("no phase event names database %s: %v", d.Name, r.phases)
			}
		}
		if len(file.Databases) != len(pipeServerDatabases) || !r.phases["databases"] {
			t.Errorf("summary lists %d databases, want %d; phases %v", len(file.Databases), len(pipeServerDatabases), r.phases)
		}
		if !reflect.DeepEqual(r.rows, want) || file.Rows != total || file.RawBytes <= 0 || file.Tables == 0 || file.WallSeconds <= 0 {
			t.Errorf("table events add up to %v rows, want %v; summary %+v", r.rows, want, file)
		}
		if len(r.plans) == 0 {
			t.Error("no plan announced")
		}
	}

	t.Run("restore", func(t *testing.T) {
		dst := pgtest.New(t)
		file := filepath.Join(dir, "server.pgs")
		dumpSum := filepath.Join(dir, "dump.json")
		mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file, "-j", "2", "--chunk-size", "256kB", "--summary-json", dumpSum)
		// The largest tables name their database: same-named tables of
		// two databases are never summed into one.
		dumped := readSummary(t, dumpSum)
		if len(dumped.Largest) == 0 || dumped.Largest[0].Table != `shop: "public"."orders"` {
			t.Errorf("dump --all's largest tables %+v, want shop's orders first, named with its database", dumped.Largest)
		}
		for _, tt := range dumped.Largest {
			if db, _, ok := strings.Cut(tt.Table, ": "); !ok || pipeServerDatabases[db] == 0 {
				t.Errorf("dump --all's largest table %q does not name its database", tt.Table)
			}
		}
		sum := filepath.Join(dir, "restore.json")
		res := mustPgsprint(t, append([]string{"restore", "--all", "-f", file, "-d", dst.ConnString("postgres"), "-j", "2", "--summary-json", sum}, json...)...)
		r := readServerRun(t, res.stderr)
		checkRun(t, r, sum)
		// The totals are the server's, not the first database's.
		if want := fmt.Sprintf("%d databases (totals) on ", len(pipeServerDatabases)); !strings.HasPrefix(r.summary.Target, want) {
			t.Errorf("restore --all's summary target %q, want %q...", r.summary.Target, want)
		}
		if r.summary.Globals == nil || r.summary.Globals.Roles != 1 {
			t.Errorf("summary's globals: %+v", r.summary.Globals)
		}
		// The archive's totals from the first plan on: no bar reaches
		// 100% before the last database is restored.
		for _, p := range r.plans {
			if p.Op != "restore" || p.Rows != wantRows || p.Bytes != r.summary.RawBytes {
				t.Errorf("plan %+v, want %d rows and %d bytes (the whole archive's)", p, wantRows, r.summary.RawBytes)
			}
		}
		for _, s := range r.states {
			if s.RowsTotal != wantRows || s.Rows > s.RowsTotal || s.Bytes > s.BytesTotal {
				t.Errorf("progress %+v, want %d rows in all", s, wantRows)
			}
		}
		requireSameServer(t, src, dst)
	})

	t.Run("clone", func(t *testing.T) {
		dst := pgtest.New(t)
		sum := filepath.Join(dir, "clone.json")
		res := mustPgsprint(t, append([]string{"clone", "--all", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"),
			"-j", "2", "--chunk-size", "256kB", "--summary-json", sum}, json...)...)
		r := readServerRun(t, res.stderr)
		checkRun(t, r, sum)
		// Estimates (the source's sizes, then each database's catalog),
		// announced before any database begins.
		if p := r.plans[0]; p.Op != "clone" || !p.Estimated || p.Bytes <= 0 {
			t.Errorf("first plan %+v", p)
		}
		requireSameServer(t, src, dst)
	})

	t.Run("clone killed and resumed", func(t *testing.T) {
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
			t.Log("the clone finished before the kill")
		case <-time.After(time.Duration(rng.Int64N(int64(400 * time.Millisecond)))):
			cmd.Process.Kill()
			<-exited
			// Started again without --resume, it is refused in one line
			// (the killed run's temporary files named before it).
			r := pgsprint(t, nil, args...)
			msg := strings.TrimSpace(withoutLines(r.stderr, "removed a stale temporary file"))
			if r.code != 1 || !strings.Contains(msg, "holds an unfinished clone --all of this source: finish it with --resume") || strings.Count(msg, "\n") != 0 {
				t.Errorf("clone --all over an unfinished one: exit %d, want 1 and one line:\n%s", r.code, r.stderr)
			}
			sum := filepath.Join(dir, "resume.json")
			res := mustPgsprint(t, append(append(args, "--resume", "--summary-json", sum), json...)...)
			// Every line JSON but the warnings about the killed run's
			// temporary files, which come before the run starts.
			checkRun(t, readServerRun(t, withoutLines(res.stderr, "removed a stale temporary file")), sum)
		}
		if markerRole(conn) {
			t.Error("the whole-server journal outlived the completed clone")
		}
		requireSameServer(t, src, dst)
	})
}
