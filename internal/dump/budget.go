package dump

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/semaphore"
)

// LockBudget shares a source server's lock table among the pg_dumps of a
// run that reads several of its databases (dump --all, clone --all). Each
// pg_dump holds one lock per table it dumps until it exits, and the
// server's lock table is shared by every database: two databases that
// pg_dump can each dump alone may not fit at once ("out of shared
// memory"). A pg_dump takes as many slots of the budget as it will hold
// locks before it starts, and gives them back when it exits, so that
// those whose locks would together exceed the lock table run one after
// another, and a run succeeds wherever pg_dumpall (one pg_dump at a time)
// does. One that needs more than the whole budget runs alone.
//
// The budget is the lock table's size as PostgreSQL documents it,
// max_locks_per_transaction * (max_connections +
// max_prepared_transactions); the server's shared memory has some slack
// beyond it, which the run's other connections (leaders, readers: a few
// locks each) use.
type LockBudget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewLockBudget sizes a budget for the server conn is connected to.
func NewLockBudget(ctx context.Context, conn *pgx.Conn) (*LockBudget, error) {
	t, err := ReadLockTable(ctx, conn)
	if err != nil {
		return nil, err
	}
	size := t.Documented
	return &LockBudget{sem: semaphore.NewWeighted(max(size, 1)), size: max(size, 1)}, nil
}

// Size is the budget's slots.
func (b *LockBudget) Size() int64 { return b.size }

// acquire waits until tables' locks and pg_dump's own fit beside those of
// the pg_dumps running, and returns what gives them back. A nil budget
// (a run reading one database) waits for nothing.
func (b *LockBudget) acquire(ctx context.Context, tables int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n := min(tables+PgDumpOverhead, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { b.sem.Release(n) }, nil
}

// checkLockSlots refuses a pg_dump of the session's database whose table
// locks cannot fit the source's lock table (LockSlots), and
// warns when they may not.
func (s *Session) checkLockSlots(ctx context.Context, log *slog.Logger) error {
	n, err := TablesToLock(ctx, s.leader)
	if err != nil {
		return err
	}
	warning, detail, err := LockSlots(ctx, s.leader, n)
	if err != nil {
		return err
	}
	if warning {
		log.Warn(detail)
	}
	return nil
}
