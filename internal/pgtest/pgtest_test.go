package pgtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/compare"

	"github.com/jackc/pgx/v5"
)

// TestTortureRoundTripHarness checks the harness itself: two independent
// loads of the torture script must compare equal, and a one-row or one-LO
// change must make the comparisons fail.
func TestTortureRoundTripHarness(t *testing.T) {
	c := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if c.Version() < 10 {
		t.Fatalf("Version() = %d, want a major version >= 10", c.Version())
	}
	t.Logf("PostgreSQL %d from %s on port %d, socket dir %s", c.Version(), c.BinDir(), c.Port(), c.SocketDir())

	t.Run("tcp_scram", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(c.TCPConnString("postgres", SuperuserName))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Password = SuperuserPassword
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("TCP login with the superuser password: %v", err)
		}
		var method string
		if err := conn.QueryRow(ctx, "SELECT coalesce(inet_server_addr()::text, 'socket')").Scan(&method); err != nil {
			t.Fatal(err)
		}
		if method != "127.0.0.1/32" && method != "127.0.0.1" {
			t.Errorf("inet_server_addr() = %q, want 127.0.0.1", method)
		}
		if err := conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
		cfg.Password = "wrong"
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			_ = conn.Close(ctx)
			t.Fatal("TCP login with a wrong password succeeded; pg_hba is not scram-sha-256")
		}
	})

	t.Run("psql_on_error_stop", func(t *testing.T) {
		err := c.ExecPsql(ctx, "postgres", "CREATE TABLE before_error ();\nSELECT no_such_column;\nCREATE TABLE after_error ();\n")
		if err == nil {
			t.Fatal("ExecPsql succeeded on a failing script")
		}
		if !strings.Contains(err.Error(), "no_such_column") {
			t.Errorf("error does not quote psql's message: %v", err)
		}
		var n int
		conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx) //nolint:errcheck
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'after_error'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Error("psql went on after an error")
		}
		if err := c.Exec(ctx, "postgres", "SELECT 1; SELECT no_such_column"); err == nil {
			t.Error("Exec succeeded on a failing script")
		}
	})

	dbA := "torture_a"
	dbB := `db "q" ü 'sq' \bs`
	for _, db := range []string{dbA, dbB} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	// Load both at once: that halves the wall time and exercises the
	// race-safe role creation.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, db := range []string{dbA, dbB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.ExecPsql(ctx, db, TortureSQL())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("loading torture.sql: %v", err)
		}
	}
	t.Logf("loaded torture.sql twice in %v", time.Since(start).Round(time.Millisecond))

	connA, connB := c.ConnString(dbA), c.ConnString(dbB)

	dumpA := SchemaDump(t, c.BinDir(), connA)
	dumpB := SchemaDump(t, c.BinDir(), connB)
	if d := compare.SchemaDiff(dumpA, dumpB); d != "" {
		t.Fatalf("schemas of two torture loads differ:\n%s", d)
	}
	for _, want := range []string{`\restrict KEY`, "CREATE MATERIALIZED VIEW app.mv_empty", `CREATE SCHEMA "ünï côdé"`, "FORCE ROW LEVEL SECURITY", "EXCLUDE USING gist"} {
		if !strings.Contains(dumpA, want) {
			t.Errorf("schema dump lacks %q", want)
		}
	}
	if strings.Contains(dumpA, "Dumped by pg_dump version 1") {
		t.Error("pg_dump version line not normalized")
	}

	fpA := Fingerprint(t, connA)
	fpB := Fingerprint(t, connB)
	if d := compare.FingerprintDiff(fpA, fpB); len(d) > 0 {
		t.Fatalf("fingerprints of two torture loads differ:\n%s", strings.Join(d, "\n"))
	}
	checkFingerprint(t, fpA)

	// The same comparisons through the Require* entry points.
	RequireSameSchema(t, c.BinDir(), connA, connB)
	RequireSameData(t, connA, connB)

	// A torture database copied from the cluster's template (TortureDB,
	// twice: the second copies the template the first loaded) is a load,
	// and so is RequireTorture's reference, which the copies are compared
	// with.
	t.Run("torture_copies", func(t *testing.T) {
		var copies []string
		t.Run("copy", func(t *testing.T) {
			for range 2 {
				db := TortureDB(t, c, "torture copy")
				RequireTorture(t, c, c.ConnString(db))
				copies = append(copies, db)
			}
		})
		RequireTorture(t, c, connA)
		if len(copies) != 2 || copies[0] == copies[1] {
			t.Fatalf("TortureDB made %q", copies)
		}
		for _, db := range copies { // dropped when the subtest ended
			if err := c.Exec(ctx, db, "SELECT 1"); err == nil {
				t.Errorf("database %q outlived its test", db)
			}
		}
	})

	// Now break B in three small ways and make sure each is noticed.
	if err := c.Exec(ctx, dbB, `
		UPDATE "ünï côdé"."tâblé ñame" SET "t" = 't1 changed' WHERE "col ""with"" quotes" = 1;
		SELECT lo_put(900003, 17, '\x00');
		SELECT setval('app.unused_seq', 42);`); err != nil {
		t.Fatal(err)
	}
	d := compare.FingerprintDiff(fpA, Fingerprint(t, connB))
	wantKeys := []string{`"ünï côdé"."tâblé ñame"`, "large object 900003", "app.unused_seq"}
	if len(d) != len(wantKeys) {
		t.Errorf("after changing one row, one LO byte and one sequence, got %d differences, want %d:\n%s", len(d), len(wantKeys), strings.Join(d, "\n"))
	}
	for _, k := range wantKeys {
		if !containsPrefix(d, k+":") {
			t.Errorf("change of %s not detected; diff:\n%s", k, strings.Join(d, "\n"))
		}
	}

	if err := c.Exec(ctx, dbB, `COMMENT ON TABLE app.empty_table IS 'changed comment'`); err != nil {
		t.Fatal(err)
	}
	sd := compare.SchemaDiff(dumpA, SchemaDump(t, c.BinDir(), connB))
	if !strings.Contains(sd, "+ COMMENT ON TABLE app.empty_table IS 'changed comment';") ||
		!strings.Contains(sd, "- COMMENT ON TABLE app.empty_table IS 'deliberately empty';") {
		t.Errorf("schema change not shown as expected:\n%s", sd)
	}

	// Close is idempotent and removes everything.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(c.SocketDir()); !os.IsNotExist(err) {
		t.Errorf("cluster directory still exists after Close (stat: %v)", err)
	}
}

// checkFingerprint spot-checks that the fingerprint covers every kind of
// object it promises to, with the row counts the torture script creates.
func checkFingerprint(t *testing.T, fp map[string]string) {
	t.Helper()
	want := map[string]string{
		"app.all_types":            "rows=2006 ",
		`"MixedCase"."MixedTable"`: "rows=1000 ",
		`"ünï côdé"."tâblé ñame"`:  "rows=1100 ",
		`"has ""quotes"" and spaces"."line
break"`: "rows=3 ",
		"app.cities":                     "rows=300 ", // FROM ONLY: children not included
		"app.capitals":                   "rows=50 ",
		"app.hamlets":                    "rows=20 ",
		"app.cache":                      "rows=500 ", // unlogged
		"app.empty_table":                "rows=0 hash=0/0",
		"app.no_columns":                 "rows=3 ",
		"app.dropped":                    "rows=1100 ",
		"app.measurements_2023_eu":       "rows=",
		`"MixedCase"."Measurements2024"`: "rows=",
		"app.measurements_default":       "rows=",
		"app.events_null":                "rows=375 ",
		"app.forced":                     "rows=400 ", // RLS must not filter
		"app.secrets":                    "rows=300 ",
		"app.mv_totals":                  "rows=1000 ",
		"app.mv_top":                     "rows=",
		"app.mv_empty":                   "not populated",
		"app.weird_seq":                  "last_value=-5 is_called=true",
		"app.unused_seq":                 "last_value=1 is_called=false",
		"app.ident_bser_seq":             "last_value=5000 is_called=false",
		"app.ident_ser_seq":              "last_value=1511 is_called=true",
		"large object 900001":            `owner="postgres" acl="" comment="" size=3200000 `,
		"large object 900002":            `owner="pgtest_owner" `,
		"large object 900003":            `owner="postgres" acl="{postgres=rw/postgres,pgtest_reader=r/postgres,`,
		"large object 900004":            `owner="postgres" acl="" comment="a comment with 'quotes', ünï côdé and a\nnewline" `,
		"large object 900005":            `owner="postgres" acl="" comment="" size=0 md5=d41d8cd98f00b204e9800998ecf8427e`,
		"large object 900006":            `owner="postgres" acl="" comment="" size=1000003 `,
		"large object 910199":            `owner="postgres" `,
	}
	for k, prefix := range want {
		v, ok := fp[k]
		if !ok {
			t.Errorf("fingerprint has no key %s", k)
			continue
		}
		if !strings.HasPrefix(v, prefix) {
			t.Errorf("fingerprint[%s] = %s, want prefix %s", k, v, prefix)
		}
	}
	for k := range fp {
		if strings.HasPrefix(k, "pg_") || strings.HasPrefix(k, "information_schema.") {
			t.Errorf("fingerprint includes system relation %s", k)
		}
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestStartOptions checks that an explicit BinDir and extra settings are
// honoured and that bad input is refused before anything is started.
func TestStartOptions(t *testing.T) {
	t.Parallel()
	bin, err := FindBinDir("")
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if _, err := FindBinDir(t.TempDir()); err == nil || errors.Is(err, ErrNoBinaries) {
		t.Errorf("FindBinDir(dir without initdb) = %v, want an error that is not ErrNoBinaries (a wrong explicit dir must fail, not skip)", err)
	}
	if _, err := Start(ctx, Options{BinDir: bin, Settings: map[string]string{"work_mem\ninclude": "x"}}); err == nil {
		t.Error("Start accepted a setting name with a newline")
	}

	c := New(t, Options{BinDir: bin, Settings: map[string]string{"work_mem": "7MB", "application_name": "it's \\ odd"}})
	if c.BinDir() != bin {
		t.Errorf("BinDir() = %q, want %q", c.BinDir(), bin)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx) //nolint:errcheck
	for setting, want := range map[string]string{"work_mem": "7MB", "fsync": "off", "server_encoding": "UTF8", "max_connections": "100"} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
}
