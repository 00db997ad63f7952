// Package storetest is the conformance suite every archive medium
// (store.Backend) must pass, as restic's backend test suite is for its
// backends: a medium's package runs Run from a _test.go file with a
// factory for fresh, empty locations and the capabilities of its medium.
// Only tests import this package.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store"
)

// Medium describes the medium under test.
type Medium struct {
	// New returns a Backend for a fresh, empty location. For a medium
	// that is a stream (stdio), what Create writes must be what Open
	// then reads.
	New func(t *testing.T) store.Backend
	// Atomic: nothing can be opened at the location before Commit, and
	// after Abort nothing is there (files, objects). A stream has
	// delivered what it wrote and cannot take it back.
	Atomic bool
	// NotFound: Open of an empty location fails with store.ErrNotFound.
	NotFound bool
	// RefusesExisting: Create over an existing archive without
	// Overwrite fails with store.ErrExists (object stores). A file is
	// replaced, as pg_dump replaces its -f file.
	RefusesExisting bool
	// Replaces: Create with Overwrite over an existing archive, then
	// Commit, leaves the new content at the location.
	Replaces bool
}

// Run runs the suite.
func Run(t *testing.T, m Medium) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, m) })
	t.Run("Empty", func(t *testing.T) { testEmpty(t, m) })
	t.Run("AbortAfterCommit", func(t *testing.T) { testAbortAfterCommit(t, m) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, m) })
	if m.Atomic {
		t.Run("NothingBeforeCommit", func(t *testing.T) { testNothingBeforeCommit(t, m) })
		t.Run("AbortLeavesNothing", func(t *testing.T) { testAbort(t, m) })
	}
	if m.NotFound {
		t.Run("NotFound", func(t *testing.T) { testNotFound(t, m) })
	}
	if m.RefusesExisting {
		t.Run("RefusesExisting", func(t *testing.T) { testRefuses(t, m) })
	}
	if m.Replaces {
		t.Run("Replaces", func(t *testing.T) { testReplaces(t, m) })
	}
}

// content is n deterministic bytes.
func content(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// write creates, writes data in uneven pieces and commits.
func write(t *testing.T, b store.Backend, data []byte, opts store.CreateOptions) {
	t.Helper()
	ctx := context.Background()
	s, err := b.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer s.Abort()
	for rest, n := data, 1; len(rest) > 0; n = n*3 + 1 {
		k := min(n, len(rest))
		if w, err := s.Write(rest[:k]); err != nil || w != k {
			t.Fatalf("Write: %d, %v", w, err)
		}
		rest = rest[k:]
	}
	if err := s.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// readBack opens b and checks it holds want: at many offsets (short reads
// at the end included) and concurrently through Random, or front to back
// through Sequential.
func readBack(t *testing.T, b store.Backend, want []byte) {
	t.Helper()
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	r, size, ok := src.Random()
	if !ok {
		got, err := io.ReadAll(src.Sequential())
		if err != nil {
			t.Fatalf("Sequential: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read back %d bytes, want %d equal ones", len(got), len(want))
		}
		return
	}
	if size != int64(len(want)) {
		t.Fatalf("size %d, want %d", size, len(want))
	}
	checkAt := func(off int64, n int) error {
		buf := make([]byte, n)
		got, err := r.ReadAt(buf, off)
		end := min(off+int64(n), size)
		wantN := int(end - off)
		if off >= size {
			wantN = 0
		}
		switch {
		case got != wantN:
			return errors.New("wrong count")
		case wantN < n && !errors.Is(err, io.EOF):
			return errors.New("short read without io.EOF")
		case wantN == n && err != nil && !errors.Is(err, io.EOF):
			return err
		case got > 0 && !bytes.Equal(buf[:got], want[off:off+int64(got)]):
			return errors.New("wrong bytes")
		}
		return nil
	}
	// The edges, then random offsets: each ReadAt of a remote medium is a
	// request or more, so that the suite stays seconds for every medium.
	rng := rand.New(rand.NewPCG(3, 4))
	offsets := []int64{0, 1, size / 2, max(size-1, 0), size, size + 10}
	for range 12 {
		offsets = append(offsets, rng.Int64N(size+1))
	}
	for _, off := range offsets {
		for _, n := range []int{1, 7, 4096, 100000} {
			if err := checkAt(off, n); err != nil {
				t.Fatalf("ReadAt(%d bytes at %d) of a %d byte archive: %v", n, off, size, err)
			}
		}
	}
	if size == 0 {
		return
	}
	// Concurrent readers of different ranges, as restore workers read
	// different streams at once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for range 25 {
				if err := checkAt(rng.Int64N(size), 1+rng.IntN(65536)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent ReadAt: %v", err)
	}
}

func testRoundTrip(t *testing.T, m Medium) {
	for _, n := range []int{1, 1000, 3<<20 + 17} {
		b := m.New(t)
		data := content(uint64(n), n)
		write(t, b, data, store.CreateOptions{SizeHint: int64(n)})
		readBack(t, b, data)
	}
}

// testEmpty: an archive of no bytes is stored and read back as such
// (the archive reader, not the medium, refuses it).
func testEmpty(t *testing.T, m Medium) {
	b := m.New(t)
	write(t, b, nil, store.CreateOptions{})
	readBack(t, b, nil)
}

func testAbortAfterCommit(t *testing.T, m Medium) {
	b := m.New(t)
	data := content(9, 5000)
	ctx := context.Background()
	s, err := b.Create(ctx, store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s.Abort()
	s.Abort()
	readBack(t, b, data)
}

func testNothingBeforeCommit(t *testing.T, m Medium) {
	b := m.New(t)
	ctx := context.Background()
	s, err := b.Create(ctx, store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	if _, err := s.Write(content(1, 3<<20)); err != nil {
		t.Fatal(err)
	}
	if src, err := b.Open(ctx); err == nil {
		src.Close()
		t.Fatal("Open succeeded before Commit")
	}
	if err := s.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, b, content(1, 3<<20))
}

func testAbort(t *testing.T, m Medium) {
	b := m.New(t)
	ctx := context.Background()
	s, err := b.Create(ctx, store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(content(2, 2<<20)); err != nil {
		t.Fatal(err)
	}
	s.Abort()
	s.Abort()
	if err := s.Commit(ctx); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if src, err := b.Open(ctx); err == nil {
		src.Close()
		t.Fatal("Open succeeded after Abort")
	} else if m.NotFound && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Open after Abort: %v, want store.ErrNotFound", err)
	}
}

func testNotFound(t *testing.T, m Medium) {
	b := m.New(t)
	_, err := b.Open(context.Background())
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Open of an empty location: %v, want store.ErrNotFound", err)
	}
	if err.Error() == "" || err.Error() == store.ErrNotFound.Error() {
		t.Errorf("error %q does not say what is missing", err)
	}
}

func testRefuses(t *testing.T, m Medium) {
	b := m.New(t)
	old := content(4, 100)
	write(t, b, old, store.CreateOptions{})
	_, err := b.Create(context.Background(), store.CreateOptions{})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("Create over an archive without Overwrite: %v, want store.ErrExists", err)
	}
	readBack(t, b, old)
}

func testReplaces(t *testing.T, m Medium) {
	b := m.New(t)
	write(t, b, content(5, 20000), store.CreateOptions{})
	// Before the new one commits, the old archive is still there.
	ctx := context.Background()
	s, err := b.Create(ctx, store.CreateOptions{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(content(6, 300)); err != nil {
		t.Fatal(err)
	}
	readBack(t, b, content(5, 20000))
	if err := s.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	readBack(t, b, content(6, 300))
}

// testCancelled: Create and Open with a cancelled ctx fail with its
// error, and a Commit with a cancelled ctx publishes nothing (a stream
// does not complete it).
func testCancelled(t *testing.T, m Medium) {
	b := m.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := b.Create(ctx, store.CreateOptions{}); !errors.Is(err, context.Canceled) {
		if err == nil {
			s.Abort()
		}
		t.Errorf("Create with a cancelled ctx: %v, want context.Canceled", err)
	}
	if src, err := b.Open(ctx); !errors.Is(err, context.Canceled) {
		if err == nil {
			src.Close()
		}
		t.Errorf("Open with a cancelled ctx: %v, want context.Canceled", err)
	}
	s, err := b.Create(context.Background(), store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Abort()
	data := content(7, 1000)
	if _, err := s.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled ctx: %v, want context.Canceled", err)
	}
	s.Abort()
	if !m.Atomic {
		return
	}
	if src, err := b.Open(context.Background()); err == nil {
		src.Close()
		t.Fatal("an archive committed with a cancelled ctx is visible")
	}
}
