package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// holder is one Run in the background.
type holder struct {
	snapshot string
	hint     *lockedBuffer
	done     chan struct{}
	result   chan error
}

// startHolder runs Run on db and waits for the snapshot id it prints.
func startHolder(t *testing.T, ctx context.Context, c *pgtest.Instance, db string, o Options) *holder {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	h := &holder{hint: &lockedBuffer{}, done: make(chan struct{}), result: make(chan error, 1)}
	o.Source, o.Out, o.Hint, o.Done = cfg, pw, h.hint, h.done
	go func() {
		err := Run(ctx, o)
		pw.CloseWithError(io.EOF)
		h.result <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no snapshot id from the holder: %v (Run: %v)", err, <-h.result)
	}
	go io.Copy(io.Discard, pr)
	h.snapshot = strings.TrimSuffix(line, "\n")
	return h
}

// wait returns Run's result, failing the test if it does not end soon.
func (h *holder) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.result:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not end")
		return nil
	}
}

// TestHold checks the holder against a real server: the id it prints
// imports a snapshot that sees the data as of the export; every table of
// the database is locked in ACCESS SHARE mode by a session named
// ApplicationName, so TRUNCATE must wait; closing Done ends the hold
// successfully and releases the locks and the snapshot. Then the other
// ways a hold ends, on the same cluster.
func TestHold(t *testing.T) {
	c := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Run("held", func(t *testing.T) { testHeld(t, ctx, c) })
	t.Run("ends", func(t *testing.T) { testHoldEnds(t, ctx, c) })
}

func testHeld(t *testing.T, ctx context.Context, c *pgtest.Instance) {
	if err := c.CreateDB(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "held", `CREATE SCHEMA "Odd ""s""";
		CREATE TABLE "Odd ""s""".t (i int); INSERT INTO "Odd ""s""".t VALUES (1), (2);
		CREATE TABLE plain (i int) PARTITION BY RANGE (i); CREATE TABLE plain_1 PARTITION OF plain FOR VALUES FROM (0) TO (10);
		CREATE VIEW v AS SELECT 1;`); err != nil {
		t.Fatal(err)
	}
	h := startHolder(t, ctx, c, "held", Options{Check: 50 * time.Millisecond})
	// The hint follows the id on another stream.
	for i := 0; i < 100 && !strings.Contains(h.hint.String(), "--snapshot "+h.snapshot); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if h.snapshot == "" || !strings.Contains(h.hint.String(), "holding snapshot "+h.snapshot) {
		t.Fatalf("snapshot %q, hint %q", h.snapshot, h.hint.String())
	}

	conn, err := pgx.Connect(ctx, c.ConnString("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO "Odd ""s""".t VALUES (3)`); err != nil {
		t.Fatal(err)
	}
	// In the exported snapshot the row inserted after the export is not there.
	if n := countInSnapshot(t, ctx, conn, h.snapshot); n != 2 {
		t.Errorf("rows seen in the held snapshot = %d, want 2", n)
	}

	var locked []string
	rows, err := conn.Query(ctx, `SELECT l.relation::regclass::text FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE a.application_name = $1 AND l.locktype = 'relation' AND l.mode = 'AccessShareLock' AND l.granted
		AND l.relation::regclass::text NOT LIKE 'pg\_%' ORDER BY 1`, ApplicationName)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		locked = append(locked, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Tables with rows: the leaf partition, not its parent (pg.ListTables).
	for _, want := range []string{`"Odd ""s""".t`, "plain_1"} {
		if !slices.Contains(locked, want) {
			t.Errorf("tables locked by the holder %q lack %s", locked, want)
		}
	}
	if _, err := conn.Exec(ctx, `SET lock_timeout = '200ms'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `TRUNCATE "Odd ""s""".t`); err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Errorf("TRUNCATE while held: %v, want a lock timeout", err)
	}

	close(h.done)
	if err := h.wait(t); err != nil {
		t.Fatalf("holder ended by Done: %v", err)
	}
	if _, err := conn.Exec(ctx, `TRUNCATE "Odd ""s""".t`); err != nil {
		t.Errorf("TRUNCATE after the hold ended: %v", err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+h.snapshot+"'"); err == nil {
		t.Error("the snapshot can still be imported after the hold ended")
	}
}

func countInSnapshot(t *testing.T, ctx context.Context, conn *pgx.Conn, snapshot string) int {
	t.Helper()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
		t.Fatalf("importing the held snapshot: %v", err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM "Odd ""s""".t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// testHoldEnds checks how a hold ends besides Done: cancelling the context
// is a success, the holding session being terminated is a failure that
// names the snapshot, and a table locked by someone else fails the start
// within LockWaitTimeout without printing a snapshot id.
func testHoldEnds(t *testing.T, ctx context.Context, c *pgtest.Instance) {
	if err := c.CreateDB(ctx, "ends"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "ends", "CREATE TABLE t (i int)"); err != nil {
		t.Fatal(err)
	}

	t.Run("cancel", func(t *testing.T) {
		hctx, hcancel := context.WithCancel(ctx)
		h := startHolder(t, hctx, c, "ends", Options{Check: 50 * time.Millisecond})
		hcancel()
		if err := h.wait(t); err != nil {
			t.Errorf("holder ended by cancel: %v", err)
		}
	})

	t.Run("terminated", func(t *testing.T) {
		h := startHolder(t, ctx, c, "ends", Options{Check: 50 * time.Millisecond})
		var n int
		conn, err := pgx.Connect(ctx, c.ConnString("ends"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if err := conn.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", ApplicationName).Scan(&n); err != nil || n != 1 {
			t.Fatalf("terminated %d holders: %v", n, err)
		}
		err = h.wait(t)
		if err == nil || !strings.Contains(err.Error(), "snapshot "+h.snapshot+" is gone") {
			t.Errorf("holder whose session was terminated: %v", err)
		}
	})

	t.Run("lock wait timeout", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, c.ConnString("ends"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "LOCK TABLE t IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(c.ConnString("ends"))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = Run(ctx, Options{Source: cfg, Out: &out, LockWaitTimeout: "200ms"})
		if err == nil || !strings.Contains(err.Error(), "--lock-wait-timeout (200ms)") {
			t.Errorf("Run with a table locked elsewhere: %v", err)
		}
		if out.Len() != 0 {
			t.Errorf("printed a snapshot id %q though the tables were not locked", out.String())
		}
	})
}

// lockedBuffer is a bytes.Buffer the holder and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
