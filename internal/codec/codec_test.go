package codec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// testInputs are the blocks every codec must round-trip.
func testInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 256<<10)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var rows strings.Builder
	for i := 0; rows.Len() < 300<<10; i++ {
		fmt.Fprintf(&rows, "%d\tcustomer %d\t2024-01-%02d\t%d.%02d\n", i, i%977, i%28+1, i*37%10000, i%100)
	}
	return map[string][]byte{
		"empty":          {},
		"one byte":       {'x'},
		"short":          []byte("hello\n"),
		"copy rows":      []byte(rows.String()),
		"zeros":          make([]byte, 1<<20),
		"incompressible": random,
		"tiny random":    random[:13],
	}
}

func allCodecs(t testing.TB) []Codec {
	t.Helper()
	specs := []struct {
		name   string
		levels []int
	}{
		{"none", []int{0}},
		{"zstd", []int{0, 1, 3, 9, 19, 22}},
		{"lz4", []int{0, 1, 2, 9}},
		{"gzip", []int{0, 1, 6, 9}},
	}
	var out []Codec
	for _, s := range specs {
		for _, l := range s.levels {
			c, err := New(s.name, l)
			if err != nil {
				t.Fatalf("New(%q, %d): %v", s.name, l, err)
			}
			out = append(out, c)
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	inputs := testInputs()
	for i, c := range allCodecs(t) {
		for name, in := range inputs {
			t.Run(fmt.Sprintf("%d-%s-%d/%s", i, c.Name(), c.Level(), name), func(t *testing.T) {
				comp, err := c.Compress(nil, in)
				if err != nil {
					t.Fatalf("Compress: %v", err)
				}
				if len(in) == 0 && len(comp) != 0 {
					t.Fatalf("empty input compressed to %d bytes, want 0", len(comp))
				}
				// Reuse a dirty buffer to check nothing stale leaks in.
				dirty := bytes.Repeat([]byte{0xAA}, len(in)+100)
				out, err := c.Decompress(dirty[:0], comp, len(in))
				if err != nil {
					t.Fatalf("Decompress: %v", err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("round trip mismatch: got %d bytes, want %d", len(out), len(in))
				}
				if len(in) > 0 {
					if _, err := c.Decompress(nil, comp, len(in)-1); err == nil {
						t.Errorf("Decompress with rawLen too small: no error")
					}
					if _, err := c.Decompress(nil, comp, len(in)+1); err == nil {
						t.Errorf("Decompress with rawLen too large: no error")
					}
				}
			})
		}
	}
}

func TestDefaultLevels(t *testing.T) {
	tests := []struct {
		name string
		want int
	}{
		{"zstd", 3}, {"lz4", 1}, {"gzip", 6}, {"none", 0},
	}
	for _, tt := range tests {
		c, err := New(tt.name, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name() != tt.name || c.Level() != tt.want {
			t.Errorf("New(%q, 0) = %s level %d, want level %d", tt.name, c.Name(), c.Level(), tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		level int
		want  string
	}{
		{"brotli", 0, `unknown compression method "brotli" (want zstd, lz4, gzip or none)`},
		{"", 0, `unknown compression method ""`},
		{"zstd", 23, "out of range for zstd (want 1..22)"},
		{"zstd", -1, "out of range"},
		{"lz4", 10, "out of range for lz4"},
		{"gzip", 10, "out of range for gzip (want 1..9)"},
		{"none", 1, "takes no level"},
	}
	for _, tt := range tests {
		_, err := New(tt.name, tt.level)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%q, %d) error = %v, want containing %q", tt.name, tt.level, err, tt.want)
		}
	}
}

// TestCorruptInput feeds every codec damaged blocks: each must fail or at
// worst return exactly rawLen bytes, and never panic.
func TestCorruptInput(t *testing.T) {
	in := testInputs()["copy rows"][:20000]
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range allCodecs(t) {
		comp, err := c.Compress(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string][]byte{
			"truncated":  comp[:len(comp)/2],
			"one byte":   comp[:1],
			"extra tail": append(append([]byte{}, comp...), 1, 2, 3),
			"garbage":    bytes.Repeat([]byte{0xFF}, 64),
		}
		for i := 0; i < 50; i++ {
			b := append([]byte{}, comp...)
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			cases[fmt.Sprintf("flip %d", i)] = b
		}
		for name, b := range cases {
			out, err := c.Decompress(nil, b, len(in))
			if err == nil && len(out) != len(in) {
				t.Errorf("%s %s: no error but %d bytes, want %d", c.Name(), name, len(out), len(in))
			}
			if c.Name() != "none" && (name == "truncated" || name == "one byte" || name == "garbage" || name == "extra tail") && err == nil {
				t.Errorf("%s %s: no error", c.Name(), name)
			}
		}
		for _, bad := range []int{-1, MaxBlockSize + 1} {
			if _, err := c.Decompress(nil, comp, bad); err == nil {
				t.Errorf("%s: rawLen %d accepted", c.Name(), bad)
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	inputs := testInputs()
	for _, name := range []string{"none", "zstd", "lz4", "gzip"} {
		c, err := New(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var cbuf, dbuf []byte
				for i := 0; i < 2; i++ {
					for name, in := range inputs {
						if len(in) > 64<<10 {
							in = in[:64<<10]
						}
						var err error
						if cbuf, err = c.Compress(cbuf, in); err != nil {
							errs <- err
							return
						}
						if dbuf, err = c.Decompress(dbuf, cbuf, len(in)); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(dbuf, in) {
							errs <- fmt.Errorf("%s: mismatch on %s", c.Name(), name)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s-%d: %v", c.Name(), c.Level(), err)
		}
	}
}

func TestOversizedBlock(t *testing.T) {
	big := make([]byte, MaxBlockSize+1)
	for _, c := range allCodecs(t)[:2] {
		if _, err := c.Compress(nil, big); err == nil {
			t.Errorf("%s: block over MaxBlockSize accepted", c.Name())
		}
	}
}
