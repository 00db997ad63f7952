package codec

import (
	"sync"
	"time"
)

// LevelController chooses the compression level of the next frame from
// what the dump workers wait on. A worker fills a block with rows from
// the server's COPY stream (fill time: waiting for the server, mostly),
// then compresses it (encode time). While encoding takes well under the
// fill time, the server is the bound and a higher level costs little
// wall time, so the level steps up; when encoding takes as long as the
// fill, compression holds the workers back and the level steps down.
// Between the two ratios it holds (hysteresis), so that it does not swing
// back and forth on every frame.
//
// It decides once per window of observations, summed over every worker,
// so that one odd frame (a chunk's first, which waits for the query to
// start) does not move it. It is safe for concurrent use; it knows
// nothing of databases or clocks, so its tests feed it synthetic timings.
type LevelController struct {
	ladder []int // the levels it may choose, lowest first

	// machine, when set, is the machine's busy share (0 to 1, servers
	// included) since its last call: a higher level is free only while
	// cores are idle. On a machine that runs the server too, every core
	// busy means the encoder takes the server's CPU: the fill time then
	// grows with the level, and the ratios alone would climb to the top.
	machine func() float64

	mu     sync.Mutex
	at     int // index in ladder of the current level
	fill   time.Duration
	encode time.Duration
	n      int // observations in the current window
	calm   int // windows in a row that asked to step up
}

// Controller tuning. The ratios are encode time over fill time in a
// window. upRatio leaves the encoder at most a third of a worker's time;
// downRatio steps down once it takes as long as waiting for rows.
const (
	// ctlWindow is how many frames (about a MiB each) a decision sums.
	ctlWindow = 8
	// ctlUpRatio: step up while encode < upRatio x fill ...
	ctlUpRatio = 0.5
	// ctlDownRatio: ... and down once encode > downRatio x fill.
	ctlDownRatio = 1.0
	// ctlCalmWindows is how many windows in a row must ask for a higher
	// level before it steps up, so that it climbs more slowly than it
	// falls: a level too high costs wall time, one too low only bytes.
	ctlCalmWindows = 2
	// ctlBusyCeiling: no step up while the machine's cores are busier
	// than this; ctlBusyFull: above this, step down.
	ctlBusyCeiling = 0.80
	ctlBusyFull    = 0.95
)

// NewLevelController starts at the lowest of levels (given lowest first),
// the level that costs least if the encoder turns out to be the bound.
func NewLevelController(levels []int) *LevelController {
	return &LevelController{ladder: append([]int(nil), levels...)}
}

// WatchMachine makes the controller climb only while the machine has idle
// cores: busy returns the machine's busy share since its last call. Left
// unset (or where the share cannot be read, busy returning a negative
// number) the ratios alone decide.
func (c *LevelController) WatchMachine(busy func() float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.machine = busy
}

// Level is the level to compress the next frame at.
func (c *LevelController) Level() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ladder[c.at]
}

// Range is the lowest and the highest level the controller may choose.
func (c *LevelController) Range() (lo, hi int) {
	return c.ladder[0], c.ladder[len(c.ladder)-1]
}

// Observe records one frame: level is the level asked for before it was
// written (Level), fill the time its rows took to arrive, encode the time
// compressing and appending it took. Frames written at another level than
// the current one (the level changed meanwhile) describe the old level
// and are left out.
func (c *LevelController) Observe(level int, fill, encode time.Duration) {
	if fill < 0 || encode < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if level != c.ladder[c.at] {
		return
	}
	c.fill += fill
	c.encode += encode
	c.n++
	if c.n < ctlWindow {
		return
	}
	fill, encode = c.fill, c.encode
	c.fill, c.encode, c.n = 0, 0, 0
	busy := -1.0
	if c.machine != nil {
		busy = c.machine()
	}
	switch {
	case busy > ctlBusyFull || float64(encode) > ctlDownRatio*float64(fill):
		c.calm = 0
		if c.at > 0 {
			c.at--
		}
	case busy > ctlBusyCeiling:
		c.calm = 0
	case float64(encode) < ctlUpRatio*float64(fill):
		c.calm++
		if c.calm >= ctlCalmWindows && c.at < len(c.ladder)-1 {
			c.at++
			c.calm = 0
		}
	default:
		c.calm = 0
	}
}
