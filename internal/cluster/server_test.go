package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// TestServerRoundTrip: a server with roles, a tablespace, a LATIN1
// database, a template, a database refusing connections and an excluded
// one (pgtest.LoadServer) is dumped by Dump (two jobs, app.orders in
// several chunks): the archive holds the globals (roles, tablespace), the
// three databases and why the others were skipped; a user who cannot read
// pg_authid dumps the roles without passwords, said in the result and the
// archive. Clone into a server that has role bob with other attributes
// keeps it and says how it differs; Restore into a fresh server (the
// tablespace where it was) keeps only postgres; each time the globals,
// every database's pg_dump schema and row hashes are equal to the
// source's. One database of the archive restores on its own, recreated
// (Create, Clean) or into another database. cmd/pgsprint's
// TestDumpAllRestoreAll holds what the binary prints, --to-sql through
// psql, the refusals' exit codes and a SIGKILLed restore resumed.
func TestServerRoundTrip(t *testing.T) {
	t.Parallel()
	src := pgtest.New(t)
	ts := pgtest.TablespaceDir(t)
	pgtest.LoadServer(t, src, ts)
	bin := src.BinDir()
	wantGlobals := pgtest.GlobalsDump(t, bin, src.ConnString("postgres"))
	wantSchema, wantData := map[string]string{}, map[string]map[string]string{}
	for _, db := range pgtest.ServerDatabases {
		wantSchema[db] = pgtest.SchemaDump(t, bin, src.ConnString(db), "--create")
		wantData[db] = pgtest.Fingerprint(t, src.ConnString(db))
	}
	sameDatabases := func(t *testing.T, conn func(db string) string, schemaFlags ...string) {
		t.Helper()
		for _, db := range pgtest.ServerDatabases {
			want := wantSchema[db]
			if len(schemaFlags) > 0 {
				want = pgtest.SchemaDump(t, bin, src.ConnString(db), append([]string{"--create"}, schemaFlags...)...)
			}
			if d := compare.SchemaDiff(want, pgtest.SchemaDump(t, bin, conn(db), append([]string{"--create"}, schemaFlags...)...)); d != "" {
				t.Errorf("database %s: schemas differ:\n%s", db, d)
			}
			if d := compare.FingerprintDiff(wantData[db], pgtest.Fingerprint(t, conn(db))); len(d) > 0 {
				t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
			}
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "server.pgs")
	res := dumpServer(t, src.ConnString("postgres"), file, 2, "skip*")
	if want := []string{"app", "lat", "postgres"}; !reflect.DeepEqual(res.Databases, want) {
		t.Errorf("dumped %v, want %v", res.Databases, want)
	}
	if got, want := fmt.Sprint(res.Skipped), "[{noconn does not allow connections} {skipme --exclude-database} {template0 template} {template1 template}]"; got != want {
		t.Errorf("skipped %s, want %s", got, want)
	}
	if res.Tables != 5 || res.Chunks <= res.Tables {
		t.Errorf("dumped %d tables in %d chunks, want 5 tables, app.orders in several chunks", res.Tables, res.Chunks)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 || entries[0].Name() != "server.pgs" {
		t.Errorf("%s holds %v (%v), want server.pgs alone", dir, entries, err)
	}
	m, globals := readServer(t, file)
	roles, spaces, err := GlobalsObjects(globals)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(roles, spaces) != "[alice bob postgres readers] [space1]" || m.FormatVersion != 5 || m.Globals.NoRolePasswords {
		t.Errorf("the archive holds roles %v, tablespaces %v, format %d, no passwords %v", roles, spaces, m.FormatVersion, m.Globals.NoRolePasswords)
	}
	lat := false
	for _, d := range archive.DatabaseSummaries(m, nil) {
		if d.Name == "lat" {
			lat = d.Encoding == "LATIN1" && len(d.Tables) == 1
		}
	}
	if !lat {
		t.Errorf("the archive lacks database lat, LATIN1, with its table: %+v", archive.DatabaseSummaries(m, nil))
	}

	// A user who cannot read pg_authid dumps the roles without their
	// passwords, and is told so.
	bobConn := strings.Replace(src.ConnString("postgres"), "user=postgres", "user=bob", 1)
	nopw := filepath.Join(dir, "nopw.pgs")
	if res := dumpServer(t, bobConn, nopw, 1, "app", "lat", "postgres"); !res.NoRolePasswords || fmt.Sprint(res.Databases) != "[skipme]" {
		t.Errorf("a dump by bob: no passwords %v, databases %v, want true and skipme", res.NoRolePasswords, res.Databases)
	}
	if m, _ := readServer(t, nopw); !m.Globals.NoRolePasswords || len(archive.DatabaseSummaries(m, nil)) != 1 || archive.DatabaseSummaries(m, nil)[0].Name != "skipme" {
		t.Errorf("the archive of bob's dump: no passwords %v, databases %v", m.Globals.NoRolePasswords, archive.DatabaseSummaries(m, nil))
	}

	// Clone into a fresh server, the tablespace mapped to the default one
	// (its directory is the running source's): the same databases, roles
	// and rows.
	t.Run("clone", func(t *testing.T) {
		cl := pgtest.New(t)
		// A role the target has with other attributes is kept, and said so.
		if err := cl.Exec(context.Background(), "postgres", "CREATE ROLE bob NOLOGIN"); err != nil {
			t.Fatal(err)
		}
		opts := clone.Options{
			Options: restore.Options{Target: pgtest.Config(t, cl.ConnString("postgres")), Jobs: 2},
			Session: dump.SessionOptions{Source: pgtest.Config(t, src.ConnString("postgres")), Version: "test",
				Split: chunk.Options{ChunkSize: 256 << 10, Method: chunk.Auto}},
		}
		opts.Filter.Objects.NoTablespaces = true
		r, err := Clone(pgtest.Context(t), CloneOptions{Options: opts, ExcludeDatabases: []string{"skip*"}})
		if err != nil {
			t.Fatalf("clone --all: %v", err)
		}
		if g := r.Globals; g == nil || fmt.Sprint(g.KeptRoles) != "[bob postgres]" || len(g.DifferentRoles) == 0 ||
			!strings.HasPrefix(g.DifferentRoles[0], "bob: LOGIN in the archive, NOLOGIN on the target") {
			t.Errorf("clone --all reports the globals as %+v", g)
		}
		noSpace := func(g string) string {
			return withoutLines(pgtest.WithoutRole(pgtest.WithoutRole(g, "postgres"), "bob"), "TABLESPACE")
		}
		if got := pgtest.GlobalsDump(t, bin, cl.ConnString("postgres")); noSpace(got) != noSpace(wantGlobals) {
			t.Errorf("globals differ:\n%s", compare.SchemaDiff(noSpace(wantGlobals), noSpace(got)))
		}
		sameDatabases(t, cl.ConnString, "--no-tablespaces")
		for _, db := range []string{"noconn", "skipme"} {
			if err := cl.Exec(context.Background(), db, "SELECT 1"); err == nil {
				t.Errorf("database %s was cloned", db)
			}
		}
	})

	// The source stops and its tablespace directory is emptied, so that
	// the target, on the same host, can have the tablespace where it was.
	t.Run("restore", func(t *testing.T) {
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		pgtest.EmptyDir(t, ts)
		dst := pgtest.New(t)
		r, err := restoreServer(t, file, dst.ConnString("postgres"), nil)
		if err != nil {
			t.Fatalf("restore --all: %v", err)
		}
		if g := r.Globals; g == nil || fmt.Sprint(g.KeptRoles) != "[postgres]" {
			t.Errorf("restore --all reports the globals as %+v", g)
		}
		// The bootstrap superuser, which every server has, is kept with
		// its own password: the rest must be equal.
		if got := pgtest.GlobalsDump(t, bin, dst.ConnString("postgres")); pgtest.WithoutRole(got, "postgres") != pgtest.WithoutRole(wantGlobals, "postgres") {
			t.Errorf("globals differ:\n%s", compare.SchemaDiff(wantGlobals, got))
		}
		sameDatabases(t, dst.ConnString)
		if _, err := restoreServer(t, file, dst.ConnString("postgres"), nil); err == nil || !strings.Contains(err.Error(), `already has a database "app"`) {
			t.Errorf("restore --all over the databases: %v", err)
		}

		// One database out of the server archive: recreated under its own
		// name (Create, Clean), and into another, empty database.
		if _, err := restoreServer(t, file, dst.ConnString("postgres"), func(o *RestoreOptions) { o.Database, o.Create, o.Clean = "lat", true, true }); err != nil {
			t.Fatalf("--database lat --create --clean: %v", err)
		}
		if err := dst.CreateDB(context.Background(), "appcopy"); err != nil {
			t.Fatal(err)
		}
		if _, err := restoreServer(t, file, dst.ConnString("appcopy"), func(o *RestoreOptions) { o.Database = "app" }); err != nil {
			t.Fatalf("--database app: %v", err)
		}
		for db, from := range map[string]string{"lat": "lat", "appcopy": "app"} {
			if d := compare.FingerprintDiff(wantData[from], pgtest.Fingerprint(t, dst.ConnString(db))); len(d) > 0 {
				t.Errorf("--database %s into %s: data differs:\n%s", from, db, strings.Join(d, "\n"))
			}
		}
	})
}

// dumpServer dumps the server conn reaches into file as `pgsprint dump
// --all -j jobs --chunk-size 256kB --exclude-database exclude...` does.
func dumpServer(t testing.TB, conn, file string, jobs int, exclude ...string) *DumpResult {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Dump(pgtest.Context(t), DumpOptions{Options: dump.Options{
		Source: pgtest.Config(t, conn), File: file, Jobs: jobs, Codec: c, Version: "test",
		Split: chunk.Options{ChunkSize: 256 << 10, Method: chunk.Auto},
	}, ExcludeDatabases: exclude})
	if err != nil {
		t.Fatalf("dump --all: %v", err)
	}
	return res
}

// readServer returns the manifest and the globals script of the
// whole-server archive file.
func readServer(t testing.TB, file string) (*archive.Manifest, string) {
	t.Helper()
	b, err := location.Parse(file, location.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := archive.OpenLocation(pgtest.Context(t), b, archive.OpenOptions{Access: archive.Parallel, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := f.Source.Manifest()
	r, ok := f.Source.(*archive.Reader)
	if !ok || m.Globals == nil {
		t.Fatalf("%s: not a whole-server archive with random access", file)
	}
	sr := r.OpenStream(m.Globals.Stream)
	defer sr.Close()
	var g strings.Builder
	if _, err := io.Copy(&g, sr); err != nil {
		t.Fatal(err)
	}
	return m, g.String()
}

// restoreServer restores the whole-server archive file through the
// database conn reaches as `pgsprint restore --all -j 2` does, after edit
// changes the options (nil: none), and returns Restore's result.
func restoreServer(t testing.TB, file, conn string, edit func(*RestoreOptions)) (*RestoreResult, error) {
	t.Helper()
	ctx := pgtest.Context(t)
	f, err := archivetest.OpenLocation(t, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := RestoreOptions{Options: restore.Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: 2}, Source: f.Source}
	if edit != nil {
		edit(&opts)
	}
	return Restore(ctx, opts)
}

// withoutLines leaves the lines containing word out.
func withoutLines(s, word string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, word) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
