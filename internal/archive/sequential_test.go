package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"filippo.io/age"
)

// readSequential reads data front to back and returns every stream's bytes
// and the first error (io.EOF for a complete, sound archive).
func readSequential(data []byte, ids ...age.Identity) (map[uint32][]byte, error) {
	got := map[uint32][]byte{}
	s, err := NewSequential(bytes.NewReader(data), ids...)
	if err != nil {
		return got, err
	}
	for {
		f, err := s.Next()
		if err != nil {
			return got, err
		}
		if _, ok := got[f.Stream]; !ok {
			got[f.Stream] = []byte{}
		}
		got[f.Stream] = append(got[f.Stream], f.Data...)
	}
}

func TestSequentialRoundTrip(t *testing.T) {
	for _, name := range []string{"zstd", "lz4", "gzip", "none"} {
		t.Run(name, func(t *testing.T) {
			streams := standardStreams(1)
			data := writeArchive(t, mustCodec(t, name, 0), streams, 4096)
			got, err := readSequential(data)
			if err != io.EOF {
				t.Fatalf("sequential read ended with %v, want io.EOF", err)
			}
			for _, s := range streams {
				if !bytes.Equal(got[s.id], s.data) {
					t.Errorf("stream %d: %d bytes read, want %d", s.id, len(got[s.id]), len(s.data))
				}
			}
			if len(got) != len(streams) {
				t.Errorf("%d streams read, want %d", len(got), len(streams))
			}
		})
	}
}

// damagePositions are the offsets of an archive of size bytes that a
// damage test cuts at or flips: every one under `make test-long`; under
// `make test` the fixed header, the trailer and a quarter of the rest,
// picked by a seed the log prints (PGSPRINT_DAMAGE_SEED replays it).
func damagePositions(t *testing.T, size int) []int {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PGSPRINT_DAMAGE_SEED"), 10, 64); err == nil {
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	var at []int
	for i := range size {
		if long || i < headerFixedSize || i >= size-trailerSize || rng.IntN(4) == 0 {
			at = append(at, i)
		}
	}
	if !long {
		t.Logf("%d of %d positions, seed %d (PGSPRINT_DAMAGE_SEED replays it; make test-long takes every one)", len(at), size, seed)
	}
	return at
}

// TestSequentialDamage truncates and flips every byte of a small archive
// (damagePositions: a sample under `make test`): the reader must never
// report success, and whatever it handed out before failing must be a
// correct prefix of the stream.
func TestSequentialDamage(t *testing.T) {
	for _, name := range []string{"zstd", "none"} {
		data, streams := smallArchive(t, name)
		want := map[uint32][]byte{}
		for _, s := range streams {
			want[s.id] = s.data
		}
		check := func(what string, damaged []byte) {
			got, err := readSequential(damaged)
			if err == io.EOF || err == nil {
				t.Fatalf("%s %s: sequential read succeeded", name, what)
			}
			for id, b := range got {
				if !bytes.HasPrefix(want[id], b) {
					t.Fatalf("%s %s: stream %d handed out wrong data before failing (%v)", name, what, id, err)
				}
			}
		}
		at := damagePositions(t, len(data))
		for _, n := range at {
			_, err := readSequential(data[:n])
			if n >= headerFixedSize && !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s truncated to %d: %v, want an incomplete-archive error", name, n, err)
			}
			check(fmt.Sprintf("truncated to %d", n), data[:n])
		}
		for _, i := range at {
			damaged := append([]byte(nil), data...)
			damaged[i] ^= 0x10
			check(fmt.Sprintf("flipped at %d", i), damaged)
		}
		check("appended", append(append([]byte(nil), data...), 0))
	}
}

// TestSequentialIncompleteMessage: a cut input is reported with the bytes
// that arrived (not the end of the last whole frame), its causes said once.
func TestSequentialIncompleteMessage(t *testing.T) {
	data, _ := smallArchive(t, "zstd")
	for _, n := range []int{100, 1000, len(data) - 10} {
		_, err := readSequential(data[:n])
		if !errors.Is(err, ErrIncomplete) {
			t.Fatalf("cut at %d: err = %v", n, err)
		}
		want := fmt.Sprintf("archive is incomplete: the input ended after %d bytes, before the archive's trailer (cut off, or the dump writing it failed or is still running)", n)
		if err.Error() != want {
			t.Errorf("cut at %d: message %q, want %q", n, err, want)
		}
	}
}

// FuzzSequential: the streaming reader never panics, and whenever it
// accepts an input as complete, the seekable reader agrees byte for byte.
func FuzzSequential(f *testing.F) {
	for _, name := range []string{"zstd", "lz4", "gzip", "none"} {
		data, _ := seedArchive(f, name)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readSequential(data)
		if err != io.EOF {
			return
		}
		want, err := readAll(data)
		if err != nil {
			t.Fatalf("sequential reader accepted an archive the seekable reader rejects: %v", err)
		}
		for id, b := range want {
			if !bytes.Equal(got[id], b) {
				t.Fatalf("stream %d differs between the readers", id)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("readers see %d and %d streams", len(got), len(want))
		}
	})
}
