package codec

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgsprint/pgsprint/internal/progress"
)

// Observer is a Codec whose level follows the dump's timings: the archive's
// block writer asks it the level of the next frame (Next), and tells it,
// once the frame is written, how long the frame's rows took to arrive and
// how long writing it took (Observe).
type Observer interface {
	Codec
	Next() int
	Observe(level int, fill, encode time.Duration)
}

// ZstdAuto is zstd whose level a LevelController picks frame by frame: the
// default compression of a dump. Every frame is a complete zstd frame, and
// a zstd decoder needs nothing of the level that wrote it, so an archive
// of mixed levels restores like any other. It is safe for concurrent use.
type ZstdAuto struct {
	ctl    *LevelController
	levels map[int]*zstdCodec // one fixed-level codec per ladder level
	used   [23]atomic.Int64   // raw bytes compressed at each level
}

// NewZstdAuto returns zstd with the level chosen by the dump's timings,
// between this build's zstdAutoLevels.
func NewZstdAuto() *ZstdAuto {
	levels := zstdAutoLevels()
	z := &ZstdAuto{ctl: NewLevelController(levels), levels: make(map[int]*zstdCodec, len(levels))}
	z.ctl.WatchMachine(machineShare())
	for _, l := range levels {
		z.levels[l] = newZstd(l)
	}
	return z
}

// machineShare returns a function giving the machine's busy share since
// its last call (progress.MachineBusy over the cores' wall time), or -1
// where /proc/stat cannot be read.
func machineShare() func() float64 {
	var mu sync.Mutex
	last, at := progress.MachineBusy(), time.Now()
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		busy, now := progress.MachineBusy(), time.Now()
		if last == 0 || busy == 0 {
			return -1
		}
		wall := now.Sub(at) * time.Duration(runtime.NumCPU())
		share := -1.0
		if wall > 0 {
			share = float64(busy-last) / float64(wall)
		}
		last, at = busy, now
		return share
	}
}

// WatchMachine replaces what tells the controller how busy the machine
// is (LevelController.WatchMachine); nil leaves the ratios alone to
// decide, as tests of them do on a machine whose load is not theirs.
func (z *ZstdAuto) WatchMachine(busy func() float64) { z.ctl.WatchMachine(busy) }

// Name implements Codec: the frames are zstd's.
func (z *ZstdAuto) Name() string { return "zstd" }

// Level implements Codec: 0, as no one level wrote the archive (Range and
// Used say which could and which did).
func (z *ZstdAuto) Level() int { return 0 }

// Range is the lowest and highest level the controller may choose.
func (z *ZstdAuto) Range() (lo, hi int) { return z.ctl.Range() }

// Next implements Observer.
func (z *ZstdAuto) Next() int { return z.ctl.Level() }

// Observe implements Observer.
func (z *ZstdAuto) Observe(level int, fill, encode time.Duration) {
	z.ctl.Observe(level, fill, encode)
}

// Compress compresses src at the controller's current level.
func (z *ZstdAuto) Compress(dst, src []byte) ([]byte, error) {
	l := z.ctl.Level()
	out, err := z.levels[l].Compress(dst, src)
	if err == nil {
		z.used[l].Add(int64(len(src)))
	}
	return out, err
}

// Decompress implements Codec; the level plays no part in decoding.
func (z *ZstdAuto) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	lo, _ := z.Range()
	return z.levels[lo].Decompress(dst, src, rawLen)
}

// LevelUse is how many raw bytes were compressed at one level.
type LevelUse struct {
	Level int
	Bytes int64
}

// Used lists the levels that compressed something, lowest first.
func (z *ZstdAuto) Used() []LevelUse {
	var us []LevelUse
	for l := range z.used {
		if n := z.used[l].Load(); n > 0 {
			us = append(us, LevelUse{Level: l, Bytes: n})
		}
	}
	return us
}

// Describe says what compressed the archive, for the dump's summary:
// "zstd auto: level 1 20%, level 3 80%", each level with its share of the
// raw bytes.
func (z *ZstdAuto) Describe() string {
	return DescribeAuto(z.Used())
}

// DescribeAuto is Describe for a list of levels used.
func DescribeAuto(us []LevelUse) string {
	var total int64
	for _, u := range us {
		total += u.Bytes
	}
	if total == 0 {
		return "zstd auto: nothing compressed"
	}
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = fmt.Sprintf("level %d %.0f%%", u.Level, 100*float64(u.Bytes)/float64(total))
	}
	return "zstd auto: " + strings.Join(parts, ", ")
}
