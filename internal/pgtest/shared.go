package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// shared is the cluster of this test process that tests share (Shared):
// started by the first test that asks, stopped by CloseShared.
var shared struct {
	once sync.Once
	c    *Instance
	err  error
	dbs  atomic.Int64 // names made by DB and UniqueName, unique

	prepared atomic.Bool // PrepareShared was called
}

// Shared returns the test process's shared cluster, at default settings
// and the default PostgreSQL, started on first use. Tests that share it
// must change nothing server-wide (settings, roles other than the torture
// schema's, killed or restarted servers; those start their own with New),
// and work in databases of their own (DB), so that they can run in
// parallel. The package's TestMain must call CloseShared after m.Run.
func Shared(t testing.TB) *Instance {
	t.Helper()
	startShared()
	if shared.err != nil {
		skipIfNoBinaries(t, shared.err)
		t.Fatalf("pgtest: starting the shared cluster: %v", shared.err)
	}
	return shared.c
}

// startShared starts the shared cluster the first time it is called, and
// waits for that start in every other call.
func startShared() {
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.c, shared.err = startFromTemplate(ctx, Options{})
	})
}

// PrepareShared starts the shared cluster and loads its torture template
// (CopyTorture) in the background, for a TestMain to call before work of
// its own (building a binary), so that the first tests find both ready
// instead of waiting for them. Errors are left for Shared and CopyTorture
// to report, in the test that meets them.
func PrepareShared() {
	shared.prepared.Store(true)
	go func() {
		startShared()
		if shared.err == nil {
			_ = tortureOf(shared.c).load(shared.c) // CopyTorture reports it
		}
	}()
}

// CloseShared stops the shared cluster, if one was started; TestMain calls
// it once every test has run.
func CloseShared() error {
	if shared.prepared.Load() {
		startShared() // waits for PrepareShared's start to finish
	}
	if shared.c == nil {
		return nil
	}
	return shared.c.Close()
}

// DB creates a new empty database on c for the test, named name followed
// by a number unique in this process (name's odd characters kept), and
// drops it when the test ends; it returns the name.
func DB(t testing.TB, c *Instance, name string) string {
	t.Helper()
	db := fmt.Sprintf("%s_%d", name, shared.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DropDB(t, c, db) })
	return db
}

// DropDB drops database db of c, if it exists, terminating its sessions.
func DropDB(t testing.TB, c *Instance, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pg.Ident(db)+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: dropping database %q: %v", db, err)
	}
}

// tortureTemplates holds, per cluster, the database the torture schema is
// loaded into once, for TortureDB to copy.
var tortureTemplates struct {
	sync.Mutex
	byCluster map[*Instance]*tortureTemplate
}

type tortureTemplate struct {
	once sync.Once
	err  error

	// The reference (RequireTorture): the schema dump and fingerprint of
	// a copy nobody changes, made on first use.
	refOnce sync.Once
	refErr  error
	schema  string
	data    map[string]string
}

// tortureTemplateDB is the database of a cluster that holds the torture
// schema for TortureDB; nothing connects to it once loaded (CREATE
// DATABASE ... TEMPLATE needs it idle).
const tortureTemplateDB = "pgtest torture template"

// TortureDB makes a database holding the torture schema on c, as DB
// names one, and drops it when the test ends. It returns the name.
func TortureDB(t testing.TB, c *Instance, name string) string {
	t.Helper()
	db := fmt.Sprintf("%s_%d", name, shared.dbs.Add(1))
	CopyTorture(t, c, db)
	t.Cleanup(func() { DropDB(t, c, db) })
	return db
}

// CopyTorture creates database db on c holding the torture schema: a copy
// (CREATE DATABASE ... TEMPLATE) of a database of c loaded once, by the
// first test that asks, instead of one LoadTorture per test.
func CopyTorture(t testing.TB, c *Instance, db string) {
	t.Helper()
	loadedTorture(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Copies may run at once: each takes a share lock on the template.
	if err := c.CreateDBFrom(ctx, db, tortureTemplateDB); err != nil {
		t.Fatalf("pgtest: copying the torture database: %v", err)
	}
}

// tortureOf returns c's torture template, not necessarily loaded yet
// (load).
func tortureOf(c *Instance) *tortureTemplate {
	tortureTemplates.Lock()
	defer tortureTemplates.Unlock()
	if tortureTemplates.byCluster == nil {
		tortureTemplates.byCluster = map[*Instance]*tortureTemplate{}
	}
	tt := tortureTemplates.byCluster[c]
	if tt == nil {
		tt = &tortureTemplate{}
		tortureTemplates.byCluster[c] = tt
	}
	return tt
}

// load loads the torture schema into the template database of c, the
// first time it is called, and returns the error of that load.
func (tt *tortureTemplate) load(c *Instance) error {
	tt.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if tt.err = c.CreateDB(ctx, tortureTemplateDB); tt.err == nil {
			tt.err = c.ExecPsql(ctx, tortureTemplateDB, tortureSQL)
		}
	})
	return tt.err
}

// loadedTorture returns c's torture template, loaded by the first test
// that asks.
func loadedTorture(t testing.TB, c *Instance) *tortureTemplate {
	t.Helper()
	tt := tortureOf(c)
	if err := tt.load(c); err != nil {
		t.Fatalf("pgtest: loading the torture schema: %v", err)
	}
	return tt
}

// tortureReferenceDB is the copy of the torture template that
// RequireTorture's reference is read from: connecting to the template
// itself would make concurrent copies fail.
const tortureReferenceDB = "pgtest torture reference"

// RequireTorture fails the test unless the database behind conn holds
// exactly what CopyTorture copies on c: the same schema (with c's
// pg_dump, as RequireSameSchema) and the same data (RequireSameData).
// The torture side is dumped and fingerprinted once per cluster, from a
// copy no test touches, instead of once per comparison: a round trip of
// the torture database compares its copy with this, which also catches a
// run that changed its source.
func RequireTorture(t testing.TB, c *Instance, conn string) {
	t.Helper()
	tt := tortureReference(t, c)
	if d := compare.SchemaDiff(tt.schema, SchemaDump(t, c.BinDir(), conn)); d != "" {
		t.Fatalf("schemas differ (- the torture database, + %s):\n%s", redactConn(conn), d)
	}
	if d := compare.FingerprintDiff(tt.data, Fingerprint(t, conn)); len(d) > 0 {
		t.Fatalf("data differs (a = the torture database, b = %s), %d keys:\n%s", redactConn(conn), len(d), strings.Join(d, "\n"))
	}
}

// tortureReference returns c's torture template with its reference
// (schema dump, fingerprint) made.
func tortureReference(t testing.TB, c *Instance) *tortureTemplate {
	t.Helper()
	tt := loadedTorture(t, c)
	tt.refOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if tt.refErr = c.CreateDBFrom(ctx, tortureReferenceDB, tortureTemplateDB); tt.refErr != nil {
			return
		}
		conn := c.ConnString(tortureReferenceDB)
		if tt.schema, tt.refErr = compare.SchemaDump(ctx, c.BinDir(), conn); tt.refErr != nil {
			return
		}
		tt.data, tt.refErr = compare.Fingerprint(ctx, conn)
	})
	if tt.refErr != nil {
		t.Fatalf("pgtest: the torture reference: %v", tt.refErr)
	}
	return tt
}

// Lazy is a cluster of a test package's own settings (wal_level =
// logical, say) that the package's tests share as they share Shared's:
// started from the template by the first test that asks (Get), with Setup
// run once on it (roles the tests use: creating them in each test would
// race), and stopped by Close in the package's TestMain after m.Run. Tests
// that share it follow Shared's rules.
type Lazy struct {
	// Options are the cluster's.
	Options Options
	// Setup, if set, runs once after the cluster starts.
	Setup func(ctx context.Context, c *Instance) error

	once sync.Once
	c    *Instance
	err  error
}

// Get returns the cluster, started (and set up) on first use.
func (l *Lazy) Get(t testing.TB) *Instance {
	t.Helper()
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		l.c, l.err = startFromTemplate(ctx, l.Options)
		if l.err == nil && l.Setup != nil {
			if l.err = l.Setup(ctx, l.c); l.err != nil {
				l.err = fmt.Errorf("setting up: %w", l.err)
			}
		}
	})
	if l.err != nil {
		skipIfNoBinaries(t, l.err)
		t.Fatalf("pgtest: starting a shared cluster: %v", l.err)
	}
	return l.c
}

// Close stops the cluster, if Get started one.
func (l *Lazy) Close() error {
	l.once.Do(func() {}) // no start after Close
	if l.c == nil {
		return nil
	}
	return l.c.Close()
}

// UniqueName returns prefix followed by a number unique in this test
// process, for a database, slot or role of one test on a shared cluster.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, shared.dbs.Add(1))
}

// Main is a test package's TestMain for packages with nothing else to do
// there: it runs the tests, then stops the shared cluster (CloseShared)
// and each of lazy, and exits, with status 1 if a stop failed.
func Main(m *testing.M, lazy ...*Lazy) {
	code := m.Run()
	stops := []func() error{CloseShared}
	for _, l := range lazy {
		stops = append(stops, l.Close)
	}
	for _, stop := range stops {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
