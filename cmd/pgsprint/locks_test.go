package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestManyTablesFewLockSlots dumps 10,000 tables from a server with
// max_locks_per_transaction = 64, where pg_dump -Fc succeeds: the dump's
// workers must release their locks as they go, so that it needs no more
// lock slots than pg_dump. The archive must restore.
func TestManyTablesFewLockSlots(t *testing.T) {
	ctx := context.Background()
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("PGSPRINT_MANY_TABLES")); err == nil && v > 0 {
		n = v
	}
	c := pgtest.New(t, pgtest.Options{Settings: map[string]string{"max_locks_per_transaction": "64"}})
	if err := c.CreateDB(ctx, "many"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// One transaction per 1,000 tables: creating a table locks it too.
	for i := 0; i < n; i += 1000 {
		if err := c.Exec(ctx, "many", fmt.Sprintf(`DO $$ BEGIN FOR i IN %d..%d LOOP
			EXECUTE format('CREATE TABLE public.t%%s (id int, v int); INSERT INTO public.t%%s VALUES (%%s, %%s * 7)', i, i, i, i);
		END LOOP; END $$`, i, min(i+1000, n)-1)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d tables created in %v", n, time.Since(began))
	stop := watchLocks(t, c.ConnString("postgres"))
	file := filepath.Join(t.TempDir(), "many.pgs")
	began = time.Now()
	mustPgsprint(t, "dump", "-q", "-d", c.ConnString("many"), "-f", file, "-j", "2")
	t.Logf("dump in %v; most locks held by one pgsprint backend: %d", time.Since(began), stop())
}

// watchLocks polls pg_locks until the returned function is called, which
// returns the most locks one pgsprint backend held at once.
func watchLocks(t *testing.T, connString string) (stop func() int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	most := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer conn.Close(context.Background())
		for {
			var n int
			err := conn.QueryRow(context.Background(), `SELECT coalesce(max(n), 0) FROM (SELECT count(*) n FROM pg_catalog.pg_locks l
				JOIN pg_catalog.pg_stat_activity a USING (pid) WHERE a.application_name = 'pgsprint' GROUP BY pid) s`).Scan(&n)
			if err == nil {
				most = max(most, n)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return most
	}
}
