package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// load writes to a round's source all through it, as an application
// would: a pgbench-like writer (TPC-B transactions) and an
// acknowledged-write logger, which inserts ids into acked and records
// every id whose COMMIT the server acknowledged. Both reconnect after
// any error (a fence ends their sessions, then refuses their writes).
type load struct {
	conn   string
	next   atomic.Int64 // the logger's next id; reserve takes ids from it too
	mu     sync.Mutex
	acked  []int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startLoad(ctx context.Context, conn string, seed uint64) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{conn: conn, cancel: cancel}
	l.next.Store(1)
	l.wg.Add(2)
	go func() { defer l.wg.Done(); l.logger(ctx) }()
	go func() { defer l.wg.Done(); l.tpcb(ctx, rand.New(rand.NewPCG(seed, 7))) }()
	return l
}

// reserve takes an id the logger will not use.
func (l *load) reserve() int64 { return l.next.Add(1) - 1 }

// ahead is an id the logger will reach soon: a row of it on the target
// makes the apply worker fail there.
func (l *load) ahead(by int64) int64 { return l.next.Load() + by }

func (l *load) ack(id int64) {
	l.mu.Lock()
	l.acked = append(l.acked, id)
	l.mu.Unlock()
}

// snapshot is the ids acknowledged so far.
func (l *load) snapshot() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.acked...)
}

// late opens a session that reads the database's settings now but shows
// in pg_stat_activity only delay seconds later (post_auth_delay holds it
// between the two), then inserts one acknowledged row: a session
// starting across the fence, which may write unless the fence ends it.
func (l *load) late(ctx context.Context, delay int) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		cfg, err := pgx.ParseConfig(l.conn)
		if err != nil {
			return
		}
		cfg.ConnectTimeout = time.Duration(delay+5) * time.Second
		cfg.RuntimeParams["post_auth_delay"] = fmt.Sprint(delay)
		cfg.RuntimeParams["application_name"] = "torture late session"
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		id := l.reserve()
		if _, err := conn.Exec(ctx, "INSERT INTO acked (id) VALUES ($1)", id); err == nil {
			l.ack(id)
		}
	}()
}

// stop ends the writers and waits for them.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// session runs step over and over on one connection of its own until ctx
// ends, connecting again whenever the fence or a kill ended it: a step
// that fails drops the connection, one that succeeds is followed by
// a pause of rest.
func (l *load) session(ctx context.Context, rest time.Duration, step func(*pgx.Conn) error) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for ctx.Err() == nil {
		if conn == nil || conn.IsClosed() {
			c, err := connect(ctx, l.conn)
			if err != nil {
				pause(ctx, 50*time.Millisecond)
				continue
			}
			conn = c
		}
		if err := step(conn); err != nil {
			conn.Close(context.Background())
			conn = nil
			pause(ctx, 20*time.Millisecond)
			continue
		}
		pause(ctx, rest)
	}
}

func (l *load) logger(ctx context.Context) {
	l.session(ctx, 3*time.Millisecond, func(conn *pgx.Conn) error {
		id := l.reserve()
		if _, err := conn.Exec(ctx, "INSERT INTO acked (id) VALUES ($1)", id); err != nil {
			// Not acknowledged: maybe committed, maybe not; never
			// counted, never used again.
			return err
		}
		l.ack(id)
		return nil
	})
}

func (l *load) tpcb(ctx context.Context, rng *rand.Rand) {
	l.session(ctx, 5*time.Millisecond, func(conn *pgx.Conn) error {
		aid, tid, bid, delta := 1+rng.IntN(2000), 1+rng.IntN(20), 1+rng.IntN(2), rng.IntN(10001)-5000
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, q := range []string{
				fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d", delta, aid),
				fmt.Sprintf("UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d", delta, tid),
				fmt.Sprintf("UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d", delta, bid),
				fmt.Sprintf("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP)", tid, bid, aid, delta),
			} {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// connect opens a session with a short connect timeout.
func connect(ctx context.Context, conn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 5 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
