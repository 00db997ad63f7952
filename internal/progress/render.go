package progress

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Mode is how progress is shown.
type Mode string

// The modes of --progress.
const (
	Auto  Mode = "auto"  // bars on a terminal, lines otherwise
	Bars  Mode = "bars"  // live bars (mpb)
	Lines Mode = "lines" // one line every Interval
	JSON  Mode = "json"  // one JSON event per line
	None  Mode = "none"
)

// ParseMode checks a --progress value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Bars, Lines, JSON, None:
		return m, nil
	}
	return "", fmt.Errorf("invalid --progress %q (want auto, bars, lines, json or none)", s)
}

// Options choose how a Display shows a Tracker.
type Options struct {
	Mode     Mode
	Out      io.Writer
	Terminal bool          // Out is a terminal: Auto means Bars
	Interval time.Duration // between lines, and between JSON progress events
}

// Display renders a Tracker until Stop.
type Display struct {
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// Show starts rendering t. For JSON it must be called before the run
// reports anything, so that no event is missed.
func Show(t *Tracker, o Options) *Display {
	d := &Display{stop: make(chan struct{})}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	mode := o.Mode
	if mode == Auto {
		mode = Lines
		if o.Terminal {
			mode = Bars
		}
	}
	var loop func()
	switch mode {
	case Lines:
		loop = func() { d.lines(t, o) }
	case JSON:
		var mu sync.Mutex
		enc := json.NewEncoder(o.Out)
		t.mu.Lock()
		t.events = func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			_ = enc.Encode(e) // progress output is best effort
		}
		t.mu.Unlock()
		loop = func() { d.ticks(t, o.Interval) }
	case Bars:
		loop = func() { d.bars(t, o) }
	default:
		return d
	}
	d.done.Add(1)
	go func() {
		defer d.done.Done()
		loop()
	}()
	return d
}

// Stop ends the rendering and waits for it to finish writing, so that
// whatever is printed next starts on a clean line.
func (d *Display) Stop() {
	d.once.Do(func() { close(d.stop) })
	d.done.Wait()
}

func (d *Display) ticks(t *Tracker, every time.Duration) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-tk.C:
			t.Tick()
		}
	}
}

// lines prints one line per interval, and nothing for runs shorter than it.
// A run that printed any ends with one more line, so that its counters are
// seen at the totals they reached rather than as of the last tick.
func (d *Display) lines(t *Tracker, o Options) {
	tk := time.NewTicker(o.Interval)
	defer tk.Stop()
	printed := false
	for {
		select {
		case <-d.stop:
			if printed {
				fmt.Fprintln(o.Out, Line(t.State()))
			}
			return
		case <-tk.C:
			fmt.Fprintln(o.Out, Line(t.State()))
			printed = true
		}
	}
}

// Line is one line of progress, as shown when stderr is not a terminal.
func Line(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", s.Op, Dur(time.Duration(s.Elapsed*float64(time.Second))), s.Phase)
	fmt.Fprintf(&b, ", %s", bytesOf(s))
	fmt.Fprintf(&b, ", %s rows", Count(s.Rows))
	if rate := rateOf(s); rate > 0 {
		fmt.Fprintf(&b, ", %s/s", Bytes(int64(rate)))
	}
	if eta := etaOf(s); eta != "" {
		fmt.Fprintf(&b, ", ETA %s", eta)
	}
	fmt.Fprintf(&b, ", chunks %d/%d", s.Chunks, s.ChunksAll)
	if s.StepsAll > 0 {
		fmt.Fprintf(&b, ", indexes/constraints %d/%d", s.Steps, s.StepsAll)
	}
	if len(s.InFlight) > 0 {
		fmt.Fprintf(&b, ", in flight: %s", inFlight(s.InFlight, 4))
	}
	return b.String()
}

func bytesOf(s State) string {
	if s.BytesTotal <= 0 {
		return Bytes(s.Bytes)
	}
	return fmt.Sprintf("%s of %s%s (%d%%)", Bytes(s.Bytes), approx(s), Bytes(s.BytesTotal), min(100, 100*s.Bytes/s.BytesTotal))
}

// approx marks a dump's and a clone's totals as estimates (the catalog's
// sizes; a restore reads its archive's exact ones).
func approx(s State) string {
	if s.Op == "dump" || s.Op == "clone" {
		return "~"
	}
	return ""
}

// rateOf is the data bytes per second since the first of them arrived:
// a dump's catalog and a restore's pre-data, which move no data, would
// otherwise make the rate look slower, and the ETA longer, than the data
// will take (at 100,000 tables pre-data alone takes minutes).
func rateOf(s State) float64 {
	if s.DataElapsed <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.DataElapsed
}

func etaOf(s State) string {
	eta, ok := Remaining(s)
	if !ok || eta < time.Second {
		return ""
	}
	return eta.Round(time.Second).String()
}

// Remaining is the time the run still needs, as the ETA shows it: the
// data bytes and the non-data work (State.StepWork, index builds and the
// like weighed in bytes of data) left, at the rate the two together have
// moved since the first data byte. A restore's indexes build while other
// tables load, so one rate over both is what the run really goes at; ok
// is false when there is no rate yet or nothing left. The benchmarks
// check it against a run's real end.
func Remaining(s State) (eta time.Duration, ok bool) {
	done := s.Bytes + s.StepWorkDone
	left := max(s.BytesTotal-s.Bytes, 0) + max(s.StepWork-s.StepWorkDone, 0)
	if s.DataElapsed <= 0 || s.Bytes == 0 || left <= 0 {
		return 0, false
	}
	rate := float64(done) / s.DataElapsed
	return time.Duration(float64(left) / rate * float64(time.Second)), true
}

func inFlight(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// bars draws live bars: data bytes and rows against the plan, throughput,
// ETA, chunks with the tables in flight, and for a restore the index and
// constraint steps. It polls the tracker, so workers never wait on it.
func (d *Display) bars(t *Tracker, o Options) {
	p := mpb.New(mpb.WithOutput(o.Out), mpb.WithWidth(36), mpb.WithRefreshRate(120*time.Millisecond))
	var mu sync.Mutex
	var cur State
	state := func() State { mu.Lock(); defer mu.Unlock(); return cur }
	text := func(fn func(State) string) decor.Decorator {
		return decor.Any(func(decor.Statistics) string { return fn(state()) })
	}
	label := func(s string) decor.Decorator { return decor.Name(s, decor.WC{W: 8, C: decor.DindentRight}) }
	phase := p.New(0, mpb.NopStyle(), mpb.PrependDecorators(text(func(s State) string {
		return fmt.Sprintf("pgsprint %s · %s · %s", s.Op, s.Phase, Dur(time.Duration(s.Elapsed*float64(time.Second))))
	})))
	data := p.New(0, mpb.BarStyle(), mpb.PrependDecorators(label("data")), mpb.AppendDecorators(text(func(s State) string {
		out := " " + bytesOf(s)
		if r := rateOf(s); r > 0 {
			out += fmt.Sprintf("  %s/s", Bytes(int64(r)))
		}
		if eta := etaOf(s); eta != "" {
			out += "  ETA " + eta
		}
		return out
	})))
	rows := p.New(0, mpb.BarStyle(), mpb.PrependDecorators(label("rows")), mpb.AppendDecorators(text(func(s State) string {
		return fmt.Sprintf(" %s of %s%s", Count(s.Rows), approx(s), Count(s.RowsTotal))
	})))
	chunks := p.New(0, mpb.BarStyle(), mpb.PrependDecorators(label("chunks")), mpb.AppendDecorators(text(func(s State) string {
		out := fmt.Sprintf(" %d/%d", s.Chunks, s.ChunksAll)
		if len(s.InFlight) > 0 {
			out += "  in flight: " + inFlight(s.InFlight, 3)
		}
		return out
	})))
	var steps *mpb.Bar
	all := []*mpb.Bar{phase, data, rows, chunks}
	// Bars start with total 0 so that mpb lets SetTotal move it: the
	// dump's estimate is replaced by the real size when it is exceeded.
	set := func(b *mpb.Bar, cur, total int64) {
		b.SetTotal(max(total, cur, 1), false)
		b.SetCurrent(cur)
	}
	update := func() {
		s := t.State()
		mu.Lock()
		cur = s
		mu.Unlock()
		set(data, s.Bytes, s.BytesTotal)
		set(rows, s.Rows, s.RowsTotal)
		set(chunks, int64(s.Chunks), int64(s.ChunksAll))
		if s.StepsAll > 0 {
			if steps == nil {
				steps = p.New(0, mpb.BarStyle(), mpb.PrependDecorators(label("indexes")), mpb.AppendDecorators(text(func(s State) string {
					return fmt.Sprintf(" %d/%d indexes, constraints, foreign keys", s.Steps, s.StepsAll)
				})))
				all = append(all, steps)
			}
			set(steps, int64(s.Steps), int64(s.StepsAll))
		}
	}
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-tk.C:
			update()
		case <-d.stop:
			// The run is over: its totals are the real ones now.
			t.mu.Lock()
			t.plan.Bytes, t.plan.Rows = t.bytes.Load(), t.rows.Load()
			t.mu.Unlock()
			update()
			for _, b := range all {
				b.SetTotal(-1, true)
			}
			p.Wait()
			return
		}
	}
}
