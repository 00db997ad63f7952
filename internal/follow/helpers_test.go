package follow

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestMain stops the package's shared cluster (logical) once every test
// has run.
func TestMain(m *testing.M) { pgtest.Main(m, logical) }

// logicalSettings make a cluster that can be followed (wal_level =
// logical) and subscribe to itself: the source and the target of a test
// are two databases of it, which logical replication allows when the
// subscription creates no slot (follow's never does). The launcher starts
// an apply worker at most once per wal_retrieve_retry_interval, 5s by
// default. The limits leave room for every test of the package following
// at once on the shared cluster (logical), leftovers of refused and
// failed cases included.
var logicalSettings = map[string]string{
	"wal_level": "logical", "max_replication_slots": "64", "max_wal_senders": "64",
	"max_logical_replication_workers": "40", "max_worker_processes": "56",
	"max_connections": "300",
	// Prepared transactions: finish refuses to fence while any wait.
	"max_prepared_transactions":   "10",
	"wal_retrieve_retry_interval": "200ms",
	// The collector gives pg_current_logfile(): finish quotes the
	// apply worker's errors from the log.
	"logging_collector": "on",
}

// logical is the cluster the package's tests share (sharedLogical); the
// roles they use are created once, when it starts.
var logical = &pgtest.Lazy{
	Options: pgtest.Options{Settings: logicalSettings},
	Setup: func(ctx context.Context, c *pgtest.Instance) error {
		return c.Exec(ctx, "postgres", `CREATE ROLE weak LOGIN; CREATE ROLE ddl_app LOGIN;
			CREATE ROLE follower LOGIN REPLICATION; CREATE ROLE "lo ""reader"""`)
	},
}

// sharedLogical returns the package's shared cluster with
// logicalSettings: tests work in databases of their own (newCase), under
// slot, publication and subscription names of their own, and change
// nothing server-wide.
func sharedLogical(t *testing.T) *pgtest.Instance {
	t.Helper()
	return logical.Get(t)
}

// newLogical starts a cluster of the test's own that can be followed, of
// the PostgreSQL in binDir ("": the default), for a test that the shared
// one cannot serve (a standby of it).
func newLogical(t *testing.T, binDir string) *pgtest.Instance {
	t.Helper()
	return pgtest.New(t, pgtest.Options{BinDir: binDir, Settings: map[string]string{
		"wal_level": "logical", "max_replication_slots": "10", "max_wal_senders": "10"}})
}

// newCase creates databases src_<n> and dst_<n> on c, n unique in the
// test process, runs setup in the source, and returns the options of a
// follow from one to the other, under the default names (from dst_<n>).
func newCase(t *testing.T, c *pgtest.Instance, setup string) Options {
	t.Helper()
	ctx := context.Background()
	dstDB := pgtest.UniqueName("dst")
	srcDB := "src" + strings.TrimPrefix(dstDB, "dst")
	for _, db := range []string{srcDB, dstDB} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, srcDB, setup); err != nil {
		t.Fatal(err)
	}
	n, err := Names{}.Resolve(dstDB)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Source: config(t, c.ConnString(srcDB)), Target: config(t, c.ConnString(dstDB)), Names: n}
}

func config(t *testing.T, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pg.ConnOptions{DSN: conn}.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// withConn runs f on a connection to cfg, closed when f returns.
func withConn(t *testing.T, cfg *pgx.ConnConfig, f func(ctx context.Context, conn *pgx.Conn)) {
	t.Helper()
	ctx := context.Background()
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	f(ctx, conn)
}

// query returns the first column of every row of sql, as text.
func query(t *testing.T, cfg *pgx.ConnConfig, sql string, args ...any) (out []string) {
	t.Helper()
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		rows, err := conn.Query(ctx, sql, args...)
		if err == nil {
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	})
	return out
}

// scalar is query's one value.
func scalar(t *testing.T, cfg *pgx.ConnConfig, sql string, args ...any) string {
	t.Helper()
	v := query(t, cfg, sql, args...)
	if len(v) != 1 {
		t.Fatalf("%s: %d rows, want 1", sql, len(v))
	}
	return v[0]
}

func exec(t *testing.T, cfg *pgx.ConnConfig, sql string) {
	t.Helper()
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	})
}

// nothingLeft fails unless the source has no slot nor publication, and
// the target no subscription, of names n.
func nothingLeft(t *testing.T, src, dst *pgx.ConnConfig, n Names) {
	t.Helper()
	if v := scalar(t, src, "SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = $1", n.Slot); v != "0" {
		t.Errorf("slot %s left on the source", n.Slot)
	}
	if v := scalar(t, src, "SELECT count(*)::text FROM pg_publication WHERE pubname = $1", n.Publication); v != "0" {
		t.Errorf("publication %s left on the source", n.Publication)
	}
	if v := scalar(t, dst, "SELECT count(*)::text FROM pg_subscription WHERE subname = $1", n.Slot); v != "0" {
		t.Errorf("subscription %s left on the target", n.Slot)
	}
}

// waitFor polls sql on cfg until it returns want, for at most 30s.
func waitFor(t *testing.T, cfg *pgx.ConnConfig, want, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := scalar(t, cfg, sql, args...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q after 30s, want %q", sql, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fingerprint is compare.Fingerprint (row counts and hashes of every
// table, sequences) of cfg's database.
func fingerprint(t *testing.T, cfg *pgx.ConnConfig) map[string]string {
	t.Helper()
	fp, err := compare.FingerprintParallel(context.Background(), cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// ackWriter inserts rows into table keyed of cfg's database, one at a
// time, reconnecting whenever its session ends, and keeps the ids whose
// commit was acknowledged: a cutover must lose none of them.
type ackWriter struct {
	mu      sync.Mutex
	acked   []int
	refused int // refused as read-only: the fence
	stop    chan struct{}
	done    chan struct{}
}

// startWriter starts an ackWriter on cfg from id from.
func startWriter(cfg *pgx.ConnConfig, from int) *ackWriter {
	w := &ackWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		ctx := context.Background()
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(ctx)
			}
		}()
		for id := from; ; id++ {
			select {
			case <-w.stop:
				return
			default:
			}
			if conn == nil || conn.IsClosed() {
				var err error
				if conn, err = pg.Connect(ctx, cfg); err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
			}
			_, err := conn.Exec(ctx, "INSERT INTO keyed VALUES ($1, 'acknowledged')", id)
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, id)
			} else if strings.Contains(err.Error(), "read-only transaction") {
				w.refused++
			}
			w.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return w
}

// halt stops the writer and returns the acknowledged ids and the count
// refused as read-only.
func (w *ackWriter) halt() ([]int, int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.refused
}

// lost returns the acknowledged ids that the target's keyed lacks.
func lost(t *testing.T, dst *pgx.ConnConfig, acked []int) []string {
	t.Helper()
	return query(t, dst, "SELECT a::text FROM unnest($1::int[]) a WHERE NOT EXISTS (SELECT 1 FROM keyed k WHERE k.id = a) ORDER BY a", acked)
}
