package pgtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The bank is the consistency workload of the tests that copy a database
// while it is written to: transfers move money between accounts, each
// updating two accounts and appending to a ledger in one transaction. A
// copy taken at one instant holds the opening total, and every account
// equals its opening balance plus its ledger entries; a copy whose tables
// come from different instants does not.
const (
	bankAccounts = 200
	bankOpening  = 1000
	// BankSQL creates the bank's accounts and ledger.
	BankSQL = `CREATE TABLE public.account (id int PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE public.ledger (id bigserial PRIMARY KEY, account int NOT NULL, delta bigint NOT NULL);
INSERT INTO public.account SELECT i, 1000 FROM generate_series(1, 200) i;`
)

// Transfers is a running transfer workload on the bank (BankSQL).
type Transfers struct {
	stop chan struct{}
	wg   sync.WaitGroup
	n    atomic.Int64
}

// StartTransfers runs transfers on workers connections to connString
// until Stop, a few hundred a second: plenty to catch a table read
// outside the snapshot, without taking the cores from the run under test.
func StartTransfers(t testing.TB, connString string, workers int) *Transfers {
	t.Helper()
	b := &Transfers{stop: make(chan struct{})}
	ctx := context.Background()
	for w := range workers {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			conn, err := pgx.Connect(ctx, connString)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for {
				select {
				case <-b.stop:
					return
				default:
				}
				from, to, amount := 1+rng.IntN(bankAccounts), 1+rng.IntN(bankAccounts), 1+rng.IntN(50)
				err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					batch := &pgx.Batch{}
					batch.Queue("UPDATE public.account SET balance = balance - $2 WHERE id = $1", from, amount)
					batch.Queue("UPDATE public.account SET balance = balance + $2 WHERE id = $1", to, amount)
					batch.Queue("INSERT INTO public.ledger (account, delta) VALUES ($1, -$2::bigint), ($3, $2::bigint)", from, amount, to)
					return tx.SendBatch(ctx, batch).Close()
				})
				// A deadlock between two transfers is resolved by the
				// server aborting one; the money stays consistent.
				var pe *pgconn.PgError
				if err != nil && !(errors.As(err, &pe) && pe.Code == "40P01") {
					t.Error(err)
					return
				}
				b.n.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return b
}

// Count is how many transfers have committed so far.
func (b *Transfers) Count() int64 { return b.n.Load() }

// Stop ends the workload and waits for it.
func (b *Transfers) Stop() {
	close(b.stop)
	b.wg.Wait()
}

// CheckBank fails the test unless the bank behind connString holds the
// opening total and every account agrees with its ledger, with at least
// one transfer in it (else the check proves nothing).
func CheckBank(t testing.TB, connString, what string) {
	t.Helper()
	var total, ledgerRows, mismatched int64
	WithConn(t, connString, func(ctx context.Context, conn *pgx.Conn) {
		if err := conn.QueryRow(ctx, `SELECT (SELECT sum(balance) FROM public.account), (SELECT count(*) FROM public.ledger),
		(SELECT count(*) FROM public.account a WHERE a.balance <> 1000 + coalesce((SELECT sum(delta) FROM public.ledger l WHERE l.account = a.id), 0))`).
			Scan(&total, &ledgerRows, &mismatched); err != nil {
			t.Fatal(err)
		}
	})
	if total != bankAccounts*bankOpening {
		t.Errorf("%s: total %d, want %d", what, total, bankAccounts*bankOpening)
	}
	if mismatched != 0 {
		t.Errorf("%s: %d accounts disagree with the ledger: tables come from different instants", what, mismatched)
	}
	if ledgerRows == 0 {
		t.Errorf("%s: the ledger is empty: the snapshot predates every transfer, the test proves nothing", what)
	}
}
