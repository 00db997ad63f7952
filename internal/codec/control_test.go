package codec

import (
	"bytes"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// feed gives c windows frames of fill and encode time each at its current
// level, and returns the level it ends at.
func feed(c *LevelController, frames int, fill, encode time.Duration) int {
	for range frames {
		c.Observe(c.Level(), fill, encode)
	}
	return c.Level()
}

// step is a run of frames with the same timings.
type step struct {
	frames       int
	fill, encode time.Duration
}

func TestLevelController(t *testing.T) {
	ms := time.Millisecond
	ladder := []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		name  string
		steps []step
		want  int
	}{
		{name: "server bound climbs to the ceiling", want: 9,
			steps: []step{{400, 10 * ms, 1 * ms}}},
		{name: "encoder bound stays at the floor", want: 1,
			steps: []step{{400, 2 * ms, 5 * ms}}},
		{name: "in the band it holds", want: 1,
			steps: []step{{400, 10 * ms, 7 * ms}}},
		{name: "climbs, then falls when the encoder becomes the bound", want: 1,
			steps: []step{{400, 10 * ms, 1 * ms}, {400, 1 * ms, 5 * ms}}},
		{name: "one window is too few to climb", want: 1,
			steps: []step{{ctlWindow, 10 * ms, 1 * ms}}},
		{name: "two calm windows climb one level", want: 2,
			steps: []step{{2 * ctlWindow, 10 * ms, 1 * ms}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewLevelController(ladder)
			for _, s := range tt.steps {
				feed(c, s.frames, s.fill, s.encode)
			}
			if got := c.Level(); got != tt.want {
				t.Errorf("level = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestLevelControllerSettles models a worker whose encoder time grows with
// the level (as zstd's does) against a server that sends a block in a
// fixed time: the controller must settle on the highest level whose
// encode time is under the fill time, and stay there without swinging
// further than one level.
// TestLevelControllerMachine: the ratios of a server-bound dump ask for
// higher levels, but with the machine's cores busy (a server on the same
// machine, whose CPU the encoder would take) it climbs no higher, and with
// them full it steps down; with idle cores it climbs.
func TestLevelControllerMachine(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		busy float64
		from int // levels climbed first with idle cores
		want int
	}{
		{"idle cores: climbs", 0.3, 0, 9},
		{"busy cores: holds", 0.9, 0, 1},
		{"busy cores after a climb: holds there", 0.9, 4, 5},
		{"full cores: steps down", 0.99, 4, 1},
		{"unreadable: the ratios decide", -1, 0, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewLevelController([]int{1, 2, 3, 4, 5, 6, 7, 8, 9})
			c.WatchMachine(func() float64 { return 0 })
			feed(c, tc.from*ctlCalmWindows*ctlWindow, 10*ms, 1*ms)
			c.WatchMachine(func() float64 { return tc.busy })
			feed(c, 400, 10*ms, 1*ms)
			if got := c.Level(); got != tc.want {
				t.Errorf("level = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLevelControllerSettles(t *testing.T) {
	encodeAt := func(level int) time.Duration { return time.Duration(level) * time.Millisecond }
	c := NewLevelController([]int{1, 2, 3, 4, 5, 6, 7, 8, 9})
	const fill = 6 * time.Millisecond
	seen := map[int]bool{}
	for i := range 2000 {
		l := c.Level()
		if i > 500 {
			seen[l] = true
		}
		c.Observe(l, fill, encodeAt(l))
	}
	// Up below 3 ms (0.5 x fill), down above 6 ms: it climbs to 3, where
	// encode is 3 ms, in the band, and holds.
	if len(seen) != 1 || !seen[3] {
		t.Errorf("levels after settling = %v, want only 3", seen)
	}
}

// TestLevelControllerIgnoresStale checks that frames compressed at a level
// the controller has left do not count toward the next decision.
func TestLevelControllerIgnoresStale(t *testing.T) {
	c := NewLevelController([]int{1, 2, 3})
	feed(c, 2*ctlWindow, 10*time.Millisecond, time.Millisecond)
	if c.Level() != 2 {
		t.Fatalf("level = %d, want 2", c.Level())
	}
	for range 10 * ctlWindow {
		c.Observe(1, time.Millisecond, 10*time.Millisecond) // stale: would step down
	}
	if c.Level() != 2 {
		t.Errorf("level = %d after stale frames, want 2", c.Level())
	}
	c.Observe(2, -time.Millisecond, 0) // a clock gone backwards is no timing
	if lo, hi := c.Range(); lo != 1 || hi != 3 {
		t.Errorf("Range = %d..%d, want 1..3", lo, hi)
	}
}

// TestZstdAutoMixedLevels compresses frames while the controller climbs
// and checks that each decodes with a fresh codec (the level is not
// needed to read a frame) and that Used and Describe account for them.
func TestZstdAutoMixedLevels(t *testing.T) {
	z := NewZstdAuto()
	z.WatchMachine(nil) // the ratios alone: this machine's load is not the test's
	src := testInputs()["copy rows"]
	dec, err := New("zstd", 0)
	if err != nil {
		t.Fatal(err)
	}
	var frames [][]byte
	for range 6 * ctlWindow {
		l := z.Next()
		out, err := z.Compress(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, out)
		z.Observe(l, 10*time.Millisecond, 0)
	}
	for i, f := range frames {
		got, err := dec.Decompress(nil, f, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("frame %d: decompress: %v (equal %v)", i, err, bytes.Equal(got, src))
		}
	}
	used := z.Used()
	if len(used) < 2 {
		t.Fatalf("Used = %v, want at least two levels", used)
	}
	var total int64
	for _, u := range used {
		total += u.Bytes
	}
	if total != int64(len(frames)*len(src)) {
		t.Errorf("Used sums to %d bytes, want %d", total, len(frames)*len(src))
	}
	if d := z.Describe(); !strings.HasPrefix(d, "zstd auto: level 1 ") {
		t.Errorf("Describe = %q", d)
	}
	if d := DescribeAuto(nil); d != "zstd auto: nothing compressed" {
		t.Errorf("DescribeAuto(nil) = %q", d)
	}
	if z.Name() != "zstd" || z.Level() != 0 {
		t.Errorf("Name, Level = %q, %d; want zstd, 0", z.Name(), z.Level())
	}
}

// TestZstdAutoRandomized is the promise of zstd auto, that whatever the
// timings, every level chosen is in range and every frame decodes to its
// block: random fill and encode times move the controller while random
// blocks are compressed. PGSPRINT_ZSTDAUTO_SEED replays a run.
func TestZstdAutoRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PGSPRINT_ZSTDAUTO_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PGSPRINT_ZSTDAUTO_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	z := NewZstdAuto()
	z.WatchMachine(func() float64 { return rng.Float64() })
	lo, hi := z.Range()
	inputs := testInputs()
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	slices.Sort(names)
	var total int64
	var regime float64
	for i := range 400 {
		src := inputs[names[rng.IntN(len(names))]]
		l := z.Next()
		if l < lo || l > hi {
			t.Fatalf("frame %d: level %d outside %d..%d", i, l, lo, hi)
		}
		out, err := z.Compress(nil, src)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		got, err := z.Decompress(nil, out, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("frame %d at level %d: decompress: %v", i, l, err)
		}
		total += int64(len(src))
		// Runs of 50 frames in one regime, drawn anew for each run:
		// the encoder's share of the fill time random up to 1/4, 2 or 8.
		if i%50 == 0 {
			regime = []float64{0.25, 2, 8}[rng.IntN(3)]
		}
		fill := time.Duration(rng.IntN(20)+1) * time.Millisecond
		encode := time.Duration(rng.Float64() * regime * float64(fill))
		z.Observe(l, fill, encode)
	}
	var used int64
	for _, u := range z.Used() {
		if u.Level < lo || u.Level > hi {
			t.Errorf("Used lists level %d outside %d..%d", u.Level, lo, hi)
		}
		used += u.Bytes
	}
	if used != total {
		t.Errorf("Used sums to %d bytes, want %d", used, total)
	}
}
