package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCloneConsistencyUnderWrites clones while transfers move money
// between accounts: the target must hold the original total and every
// account must agree with the ledger, i.e. all tables come from one
// instant of the source.
func TestCloneConsistencyUnderWrites(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "bank"); err != nil {
		t.Fatal(err)
	}
	const accounts, opening = 200, 1000
	err := c.Exec(ctx, "bank", `
CREATE TABLE account (id int PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE ledger (id bigserial PRIMARY KEY, account int NOT NULL, delta bigint NOT NULL);
INSERT INTO account SELECT i, 1000 FROM generate_series(1, 200) i;
CREATE TABLE filler AS SELECT i, md5(i::text) || md5((i+1)::text) AS pad FROM generate_series(1, 300000) i;
ANALYZE;`)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var transfers atomic.Int64
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, c.ConnString("bank"))
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				from, to, amount := 1+rng.IntN(accounts), 1+rng.IntN(accounts), 1+rng.IntN(50)
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					batch := &pgx.Batch{}
					batch.Queue("UPDATE account SET balance = balance - $2 WHERE id = $1", from, amount)
					batch.Queue("UPDATE account SET balance = balance + $2 WHERE id = $1", to, amount)
					batch.Queue("INSERT INTO ledger (account, delta) VALUES ($1, -$2::bigint), ($3, $2::bigint)", from, amount, to)
					return tx.SendBatch(ctx, batch).Close()
				})
				if err != nil && !isDeadlock(err) {
					t.Error(err)
					return
				}
				transfers.Add(1)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := c.CreateDB(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	before := transfers.Load()
	mustPgsprint(t, "clone", "-q", "--source", c.ConnString("bank"), "--target", c.ConnString("copy"), "-j", "2", "--chunk-size", "16MB")
	during := transfers.Load() - before
	close(stop)
	wg.Wait()
	if during == 0 {
		t.Fatal("no transfer ran during the clone: the test proves nothing")
	}
	t.Logf("%d transfers committed while the clone ran", during)

	conn, err := pgx.Connect(ctx, c.ConnString("copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var total, ledgerRows, mismatched int64
	err = conn.QueryRow(ctx, `SELECT (SELECT sum(balance) FROM account), (SELECT count(*) FROM ledger),
		(SELECT count(*) FROM account a WHERE a.balance <> 1000 + coalesce((SELECT sum(delta) FROM ledger l WHERE l.account = a.id), 0))`).
		Scan(&total, &ledgerRows, &mismatched)
	if err != nil {
		t.Fatal(err)
	}
	if total != accounts*opening {
		t.Errorf("cloned total %d, want %d", total, accounts*opening)
	}
	if mismatched != 0 {
		t.Errorf("%d accounts disagree with the ledger: tables come from different instants", mismatched)
	}
	if ledgerRows == 0 {
		t.Error("cloned ledger is empty: the snapshot predates every transfer, the test proves nothing")
	}
}
