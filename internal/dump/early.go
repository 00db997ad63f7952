package dump

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// earlySchema is pg_dump --schema-only started as soon as the snapshot is
// exported and the filter expanded, beside the leader's catalog queries
// rather than after them. pg_dump's own catalog work is the longest part
// of dumping a schema of thousands of small tables (at 10,000 tables it
// takes most of the dump's time), and it needs nothing the catalog
// queries find: only the snapshot, the filter and the server's encoding.
// Its archive goes to a private, already unlinked temporary file until the
// archive's schema stream is open.
type earlySchema struct {
	file   *os.File
	cancel context.CancelFunc
	done   chan struct{}
	err    error // pg_dump's outcome, set before done is closed
}

// startSchema starts pg_dump for s in the background.
func (s *Session) startSchema(ctx context.Context) error {
	var tables int64
	if s.locks != nil {
		// Counted now, on the leader, which the catalog queries
		// need next.
		n, err := TablesToLock(ctx, s.leader)
		if err != nil {
			return err
		}
		tables = n
	}
	f, err := tempfile.Create("", tempfile.Schema)
	if err != nil {
		return fmt.Errorf("create a temporary file for pg_dump's schema: %w", err)
	}
	// Unlinked at once: the open file is all that is needed, and a
	// killed run leaves nothing behind.
	os.Remove(f.Name())
	ctx, cancel := context.WithCancel(ctx)
	e := &earlySchema{file: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.err = s.runPgDump(ctx, f, tables)
	}()
	s.early = e
	return nil
}

// writeTo waits for pg_dump and copies its archive to w.
func (e *earlySchema) writeTo(ctx context.Context, w io.Writer) error {
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e.err != nil {
		return e.err
	}
	if _, err := e.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read pg_dump's schema back: %w", err)
	}
	if _, err := io.Copy(w, e.file); err != nil {
		return fmt.Errorf("copy pg_dump's schema: %w", err)
	}
	return nil
}

// close stops pg_dump if it still runs and closes its file.
func (e *earlySchema) close() {
	e.cancel()
	<-e.done
	e.file.Close()
}
