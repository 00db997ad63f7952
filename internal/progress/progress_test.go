package progress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTrackerState drives a tracker through a small run and checks the
// counters a renderer polls: bytes and rows from Add, chunks and per-table
// totals from data Done, steps from non-data Done, and the work in flight
// (a table stays in flight while any of its chunks runs).
func TestTrackerState(t *testing.T) {
	tr := NewTracker("restore")
	tr.Begin(Expected{Op: "restore", Tables: 2, Chunks: 3, Bytes: 1000, Rows: 30})
	tr.Phase("data")
	tr.Steps(2)
	a1 := Work{Kind: "data", Table: `"s"."a"`, Name: `"s"."a" part 1`}
	a2 := Work{Kind: "data", Table: `"s"."a"`, Name: `"s"."a" part 2`}
	b := Work{Kind: "data", Table: `"s"."b"`, Name: `"s"."b"`}
	idx := Work{Kind: "index", Name: "a_pkey"}

	steps := []struct {
		do       func()
		inFlight []string
		chunks   int
		steps    int
	}{
		{func() { tr.Start(a1); tr.Start(a2); tr.Start(b) }, []string{`"s"."a"`, `"s"."b"`}, 0, 0},
		{func() { tr.Add(400, 10); tr.Done(a1, Done{Bytes: 400, Rows: 10, Elapsed: time.Second}) }, []string{`"s"."a"`, `"s"."b"`}, 1, 0},
		{func() { tr.Add(100, 5); tr.Done(a2, Done{Bytes: 100, Rows: 5, Elapsed: time.Second}) }, []string{`"s"."b"`}, 2, 0},
		{func() { tr.Add(500, 15); tr.Done(b, Done{Bytes: 500, Rows: 15, Elapsed: 2 * time.Second}) }, []string{}, 3, 0},
		{func() { tr.Start(idx) }, []string{"a_pkey"}, 3, 0},
		{func() { tr.Done(idx, Done{Elapsed: time.Millisecond}) }, []string{}, 3, 1},
	}
	for i, st := range steps {
		st.do()
		s := tr.State()
		if !reflect.DeepEqual(s.InFlight, st.inFlight) || s.Chunks != st.chunks || s.Steps != st.steps {
			t.Errorf("step %d: in flight %q, chunks %d, steps %d; want %q, %d, %d", i, s.InFlight, s.Chunks, s.Steps, st.inFlight, st.chunks, st.steps)
		}
	}
	s := tr.State()
	want := State{Op: "restore", Phase: "data", Bytes: 1000, BytesTotal: 1000, Rows: 30, RowsTotal: 30,
		Chunks: 3, ChunksAll: 3, Steps: 1, StepsAll: 2, InFlight: []string{}}
	if s.DataElapsed <= 0 || s.DataElapsed > s.Elapsed {
		t.Errorf("data elapsed %v of %v", s.DataElapsed, s.Elapsed)
	}
	s.Elapsed, s.DataElapsed = 0, 0
	if !reflect.DeepEqual(s, want) {
		t.Errorf("final state %+v, want %+v", s, want)
	}

	sum := tr.Summary()
	if sum.Op != "restore" || sum.Tables != 2 || sum.Chunks != 3 || sum.Rows != 30 || sum.RawBytes != 1000 {
		t.Errorf("summary totals %+v", sum)
	}
	wantLargest := []TableTime{{Table: `"s"."a"`, Bytes: 500, Rows: 15, Seconds: 2}, {Table: `"s"."b"`, Bytes: 500, Rows: 15, Seconds: 2}}
	if !reflect.DeepEqual(sum.Largest, wantLargest) {
		t.Errorf("largest %+v, want %+v (a table's chunks summed, ties by name)", sum.Largest, wantLargest)
	}
	if len(sum.Phases) != 1 || sum.Phases[0].Name != "data" || sum.Phases[0].Elapsed <= 0 {
		t.Errorf("phases %+v: want the open phase closed at the summary", sum.Phases)
	}
}

// TestSummaryLargest checks that the summary names the largest tables
// first and no more than largestN of them, and that each phase ends where
// the next begins.
func TestSummaryLargest(t *testing.T) {
	tr := NewTracker("dump")
	tr.Phase("schema")
	time.Sleep(2 * time.Millisecond)
	tr.Phase("data")
	for i, size := range []int64{5, 70, 30, 70, 10, 60, 1} {
		tab := string(rune('a' + i))
		tr.Done(Work{Kind: "data", Table: tab, Name: tab}, Done{Bytes: size})
	}
	s := tr.Summary()
	var got []string
	for _, l := range s.Largest {
		got = append(got, l.Table)
	}
	if want := []string{"b", "d", "f", "c", "e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("largest tables %q, want %q", got, want)
	}
	if len(s.Phases) != 2 || s.Phases[0].Elapsed != s.Phases[1].Start-s.Phases[0].Start {
		t.Errorf("phases %+v: the first should end where the second starts", s.Phases)
	}
}

// TestLine checks the one-line progress text of --progress=lines.
func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    State
		want string
	}{
		{"dump estimate", State{Op: "dump", Phase: "data", Elapsed: 2, DataElapsed: 2, Bytes: 1 << 20, BytesTotal: 4 << 20, Rows: 12345, Chunks: 1, ChunksAll: 4, InFlight: []string{"a"}},
			"dump 2s: data, 1.0 MiB of ~4.0 MiB (25%), 12,345 rows, 512.0 KiB/s, ETA 6s, chunks 1/4, in flight: a"},
		// 90 s of catalog and pre-data moved nothing: the rate and the
		// ETA are the data's own (at 12 GiB and 100,000 tables the early
		// ETA was otherwise several times too long).
		{"data after a long pre-data", State{Op: "restore", Phase: "data", Elapsed: 100, DataElapsed: 10, Bytes: 1 << 20, BytesTotal: 4 << 20, Chunks: 1, ChunksAll: 4},
			"restore 1m40s: data, 1.0 MiB of 4.0 MiB (25%), 0 rows, 102.4 KiB/s, ETA 30s, chunks 1/4"},
		{"restore steps, many in flight", State{Op: "restore", Phase: "post-data", Elapsed: 1, DataElapsed: 1, Bytes: 100, BytesTotal: 100, Rows: 3, Chunks: 2, ChunksAll: 2, Steps: 1, StepsAll: 3,
			InFlight: []string{"a", "b", "c", "d", "e", "f"}},
			"restore 1s: post-data, 100 B of 100 B (100%), 3 rows, 100 B/s, chunks 2/2, indexes/constraints 1/3, in flight: a, b, c, d and 2 more"},
		{"no plan, nothing moved", State{Op: "dump", Phase: "schema"},
			"dump 0s: schema, 0 B, 0 rows, chunks 0/0"},
		{"estimate exceeded", State{Op: "dump", Phase: "data", Elapsed: 1, DataElapsed: 1, Bytes: 300, BytesTotal: 100},
			"dump 1s: data, 300 B of ~100 B (100%), 0 rows, 300 B/s, chunks 0/0"},
	} {
		if got := Line(tc.s); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestFormat checks the number formats every output shares.
func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Bytes(0), "0 B"},
		{Bytes(1023), "1023 B"},
		{Bytes(1024), "1.0 KiB"},
		{Bytes(3 << 29), "1.5 GiB"},
		{Count(0), "0"},
		{Count(999), "999"},
		{Count(1000), "1,000"},
		{Count(1234567), "1,234,567"},
		{Count(-1500), "-1500"},
		{Dur(1234567 * time.Microsecond), "1.235s"},
		{Dur(12345 * time.Millisecond), "12.3s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestParseMode checks that every --progress value is accepted and
// anything else refused with a message listing the choices.
func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "bars", "lines", "json", "none"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "JSON", "line"} {
		if _, err := ParseMode(s); err == nil || !strings.Contains(err.Error(), "want auto, bars, lines, json or none") {
			t.Errorf("ParseMode(%q) error = %v", s, err)
		}
	}
}

// TestCounter checks that a Counter passes bytes through unchanged, counts
// COPY rows by newline (none for binary streams), and reports in batches
// with the rest on Flush.
func TestCounter(t *testing.T) {
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for _, binary := range []bool{false, true} {
		rec := &recorder{}
		var out bytes.Buffer
		c := NewWriter(&out, rec)
		c.Binary = binary
		n := 300 // 300 KiB: one batch of 256 KiB, the rest on Flush
		for i := 0; i < n; i++ {
			if _, err := c.Write(line); err != nil {
				t.Fatal(err)
			}
		}
		wantRows := int64(n)
		if binary {
			wantRows = 0
		}
		if out.Len() != n*len(line) || c.Total != int64(out.Len()) || c.Lines != wantRows {
			t.Errorf("binary=%v: wrote %d, Total %d, Lines %d; want %d, %d, %d", binary, out.Len(), c.Total, c.Lines, n*len(line), n*len(line), wantRows)
		}
		if len(rec.adds) != 1 || rec.adds[0][0] != flushEvery {
			t.Errorf("binary=%v: reports before Flush %v, want one of %d bytes", binary, rec.adds, flushEvery)
		}
		c.Flush()
		c.Flush() // nothing new: no empty report
		if bytes, rows := rec.sum(); len(rec.adds) != 2 || bytes != c.Total || rows != wantRows {
			t.Errorf("binary=%v: reports %v, want two summing to %d bytes, %d rows", binary, rec.adds, c.Total, wantRows)
		}
	}

	rec := &recorder{}
	r := NewReader(strings.NewReader("a\nb\nc"), rec)
	var got bytes.Buffer
	if _, err := got.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	r.Flush()
	if got.String() != "a\nb\nc" || r.Lines != 2 || r.Total != 5 {
		t.Errorf("reader passed %q, counted %d lines, %d bytes", got.String(), r.Lines, r.Total)
	}
	if bytes, rows := rec.sum(); bytes != 5 || rows != 2 {
		t.Errorf("reader reported %d bytes, %d rows", bytes, rows)
	}
}

// recorder is a Reporter that keeps every Add.
type recorder struct {
	Nop
	mu   sync.Mutex
	adds [][2]int64
}

func (r *recorder) Add(b, rows int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.adds = append(r.adds, [2]int64{b, rows})
}

func (r *recorder) sum() (b, rows int64) {
	for _, a := range r.adds {
		b += a[0]
		rows += a[1]
	}
	return b, rows
}

// TestJSONEvents runs a tracker shown as --progress=json and checks the
// event stream: one JSON object per line, in the order things happened,
// with the plan, each table chunk and step, periodic progress, and the
// summary last.
func TestJSONEvents(t *testing.T) {
	var out syncBuffer
	tr := NewTracker("dump")
	d := Show(tr, Options{Mode: JSON, Out: &out, Interval: 20 * time.Millisecond})
	tr.Begin(Expected{Op: "dump", Tables: 1, Chunks: 1, Bytes: 10, Rows: 2})
	tr.Phase("data")
	w := Work{Kind: "data", Table: `"public"."t"`, Name: `"public"."t"`}
	tr.Start(w)
	tr.Add(10, 2)
	time.Sleep(100 * time.Millisecond) // a few progress ticks
	tr.Done(w, Done{Bytes: 10, Rows: 2, Elapsed: time.Millisecond})
	tr.Done(Work{Kind: "large object", Name: "lo 1"}, Done{})
	d.Stop()
	s := tr.Summary()
	s.Target = "out.pgs"
	tr.Finish(&s)

	var events []Event
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not one JSON event: %v", sc.Text(), err)
		}
		events = append(events, e)
	}
	var kinds []string
	progress := 0
	for _, e := range events {
		if e.Event == "progress" {
			progress++
			if e.State == nil || e.State.Bytes != 10 || e.State.Rows != 2 {
				t.Errorf("progress event state %+v, want 10 bytes, 2 rows", e.State)
			}
			continue
		}
		kinds = append(kinds, e.Event)
	}
	if want := []string{"start", "phase", "table", "step", "summary"}; !reflect.DeepEqual(kinds, want) {
		t.Fatalf("events %q, want %q (progress events aside)", kinds, want)
	}
	if progress == 0 {
		t.Error("no progress event in 100ms at a 20ms interval")
	}
	byKind := map[string]Event{}
	for _, e := range events {
		byKind[e.Event] = e
	}
	if p := byKind["start"].Expected; p == nil || *p != (Expected{Op: "dump", Tables: 1, Chunks: 1, Bytes: 10, Rows: 2}) {
		t.Errorf("start event plan %+v", p)
	}
	if e := byKind["table"]; e.Work == nil || e.Work.Table != `"public"."t"` || e.Bytes != 10 || e.Rows != 2 {
		t.Errorf("table event %+v", e)
	}
	if e := byKind["summary"]; e.Summary == nil || e.Summary.Target != "out.pgs" || e.Summary.RawBytes != 10 || e.Summary.RowsPerSec <= 0 {
		t.Errorf("summary event %+v", e.Summary)
	}
	for i := 1; i < len(events); i++ {
		if events[i].Elapsed < events[i-1].Elapsed {
			t.Errorf("event %d elapsed %v before event %d's %v", i, events[i].Elapsed, i-1, events[i-1].Elapsed)
		}
	}
}

// TestWriteError checks the last event of a failed run.
func TestWriteError(t *testing.T) {
	var out bytes.Buffer
	WriteError(&out, time.Now().Add(-time.Second), "restore: table \"t\": disk full", 1)
	var e Event
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Event != "error" || e.Error != "restore: table \"t\": disk full" || e.ExitCode != 1 || e.Elapsed < 1 {
		t.Errorf("error event %+v", e)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Errorf("error event is not one line: %q", out.String())
	}
}

// TestLinesMode checks --progress=lines: nothing for a run shorter than
// the interval, and for a longer one a last line with the final totals.
func TestLinesMode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		wait     time.Duration
		lines    bool
	}{
		{"short run", time.Hour, 0, false},
		{"long run", 10 * time.Millisecond, 60 * time.Millisecond, true},
	} {
		var out syncBuffer
		tr := NewTracker("restore")
		d := Show(tr, Options{Mode: Auto, Terminal: false, Out: &out, Interval: tc.interval})
		tr.Phase("data")
		time.Sleep(tc.wait)
		tr.Add(7, 1)
		d.Stop()
		got := strings.Split(strings.TrimSpace(out.String()), "\n")
		if !tc.lines {
			if out.String() != "" {
				t.Errorf("%s: printed %q", tc.name, out.String())
			}
			continue
		}
		if last := got[len(got)-1]; len(got) < 2 || !strings.Contains(last, "7 B, 1 rows") {
			t.Errorf("%s: lines %q, want several, the last with the final totals", tc.name, got)
		}
	}
}

// TestSummaryText checks the people's summary and the JSON file.
func TestSummaryText(t *testing.T) {
	s := Summary{Op: "dump", Target: "db.pgs", WallSeconds: 2, Tables: 3, Chunks: 4, Rows: 1500, RawBytes: 4 << 20, CopyFormat: "text",
		StoredBytes: 1 << 20, Codec: "zstd", Sequences: 1, LargeObj: 2, RawPerSec: 2 << 20, RowsPerSec: 750,
		Phases:  []PhaseTime{{Name: "data", Start: time.Second, Elapsed: time.Second, Busy: 2 * time.Second, Items: 4}},
		Largest: []TableTime{{Table: `"public"."t"`, Bytes: 3 << 20, Seconds: 1.5}},
		Slowest: []Step{{Name: "index i", Seconds: 0.25}}}
	var out bytes.Buffer
	s.WriteText(&out)
	for _, want := range []string{
		"dumped 3 tables in 4 chunks, 1,500 rows, 1 sequences, 2 large objects to db.pgs in 2s\n",
		"  data:    4.0 MiB raw (COPY text), 1.0 MiB stored (zstd, 4.0x); 2.0 MiB/s, 750 rows/s\n",
		"data", "2s      4\n",
		`  largest: "public"."t" 3.0 MiB 1.5s`,
		"  slowest: index i 250ms\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	s.Op = "restore"
	out.Reset()
	s.WriteText(&out)
	if !strings.HasPrefix(out.String(), "restored 3 tables") || !strings.Contains(out.String(), " into db.pgs ") {
		t.Errorf("restore summary: %s", out.String())
	}

	path := filepath.Join(t.TempDir(), "summary.json")
	if err := s.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("summary JSON round trip:\n got %+v\nwant %+v", back, s)
	}
	if err := s.WriteJSON(filepath.Join(t.TempDir(), "no", "such", "dir.json")); err == nil || !strings.HasPrefix(err.Error(), "write summary: ") {
		t.Errorf("WriteJSON into a missing directory: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the display goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogged checks that -v's logging Reporter logs what happened and
// still passes every call on to the Reporter it wraps.
func TestLogged(t *testing.T) {
	rec := &recorder{}
	if Logged(rec, nil) != Reporter(rec) {
		t.Error("Logged without a logger does not return the Reporter itself")
	}
	var out bytes.Buffer
	tr := NewTracker("dump")
	r := Logged(tr, slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	r.Begin(Expected{Op: "dump", Tables: 2})
	r.Phase("data")
	w := Work{Kind: "data", Table: "t", Name: "t part 2"}
	r.Start(w)
	r.Add(5, 1)
	r.Done(w, Done{Bytes: 5, Rows: 1})
	r.Done(Work{Kind: "index", Name: "i"}, Done{})
	for _, want := range []string{"msg=planned op=dump tables=2", "msg=phase phase=data", `msg="data done" table=t part="t part 2" rows=1 bytes=5`, `msg="index done" name=i`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
	if s := tr.State(); s.Phase != "data" || s.Bytes != 5 || s.Chunks != 1 || s.Steps != 1 {
		t.Errorf("wrapped tracker state %+v", s)
	}
}

// TestEstimatedTotal checks a dump's byte total as chunks finish: each
// finished chunk's estimate is replaced by what it moved, so that 10,000
// tiny tables estimated at a page each do not show 3% when all is done;
// a plan that is not an estimate (a restore's) keeps its total.
func TestEstimatedTotal(t *testing.T) {
	type chunk struct{ planned, moved int64 }
	for _, tc := range []struct {
		name      string
		estimated bool
		chunks    []chunk // all planned; the first done finish
		done      int
		inFlight  int64 // bytes of the next chunk already counted
		wantTotal int64
		wantRows  int64
	}{
		{"nothing done", true, []chunk{{8192, 300}, {8192, 300}, {8192, 300}}, 0, 0, 3 * 8192, 30},
		{"one done", true, []chunk{{8192, 300}, {8192, 300}, {8192, 300}}, 1, 0, 300 + 2*8192, 30},
		{"all done", true, []chunk{{8192, 300}, {8192, 300}, {8192, 300}}, 3, 0, 900, 15},
		{"larger than estimated", true, []chunk{{100, 5000}, {100, 50}}, 1, 0, 5100, 30},
		{"in flight beyond the estimate", true, []chunk{{100, 100}, {100, 50}}, 1, 400, 500, 30},
		{"exact plan", false, []chunk{{8192, 300}, {8192, 300}}, 2, 0, 2 * 8192, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker("dump")
			p := Expected{Op: "dump", Chunks: len(tc.chunks), Rows: 30, Estimated: tc.estimated}
			for _, c := range tc.chunks {
				p.Bytes += c.planned
			}
			tr.Begin(p)
			for i, c := range tc.chunks[:tc.done] {
				w := Work{Kind: "data", Table: fmt.Sprint(i), Name: fmt.Sprint(i)}
				tr.Start(w)
				tr.Add(c.moved, 5)
				tr.Done(w, Done{Bytes: c.moved, Rows: 5, Planned: c.planned})
			}
			tr.Add(tc.inFlight, 0)
			s := tr.State()
			if s.BytesTotal != tc.wantTotal || s.RowsTotal != tc.wantRows {
				t.Errorf("total %d bytes, %d rows; want %d, %d", s.BytesTotal, s.RowsTotal, tc.wantTotal, tc.wantRows)
			}
			if tc.done == len(tc.chunks) && tc.estimated && !strings.Contains(Line(s), "(100%)") {
				t.Errorf("line at the end: %s", Line(s))
			}
		})
	}
}

// TestDataElapsed checks that the data's clock starts at its first bytes:
// not at the run's start, and not at an Add of rows alone.
func TestDataElapsed(t *testing.T) {
	tr := NewTracker("restore")
	time.Sleep(30 * time.Millisecond)
	tr.Add(0, 5)
	if s := tr.State(); s.DataElapsed != 0 {
		t.Fatalf("data elapsed %v before any byte", s.DataElapsed)
	}
	tr.Add(100, 1)
	time.Sleep(10 * time.Millisecond)
	s := tr.State()
	if s.DataElapsed <= 0 || s.DataElapsed > s.Elapsed-0.025 {
		t.Fatalf("data elapsed %v of %v: should start at the first bytes, 30 ms in", s.DataElapsed, s.Elapsed)
	}
}

// TestParts drives the parts of a whole-server run through a Tracker: the
// totals cover every expected part from the start, a part's own plan
// replaces its expectation when it begins (an estimated one converging on
// what moved), and an estimated run does not look finished while a part
// has not begun.
func TestParts(t *testing.T) {
	tr := NewTracker("clone")
	ps := NewParts(tr, "clone")
	a, b := ps.Part("a"), ps.Part("b")
	chunk := Work{Kind: "data", Table: "t", Name: "t", Whole: true}
	steps := []struct {
		name string
		do   func()
		want State // the totals and the phase
	}{
		{"expected", func() {
			ps.Expect(map[string]Expected{"a": {Bytes: 8000, Estimated: true}, "b": {Bytes: 9000, Estimated: true}})
		}, State{BytesTotal: 17000, ChunksAll: 2}},
		{"a begins", func() { a.Begin(Expected{Tables: 1, Chunks: 1, Bytes: 100, Rows: 10, Estimated: true}) },
			State{BytesTotal: 9100, RowsTotal: 10, ChunksAll: 2}},
		{"a moves more than planned", func() { a.Phase("data"); a.Add(150, 10); a.Done(chunk, Done{Bytes: 150, Rows: 10, Planned: 100}) },
			State{Phase: "a: data", Bytes: 150, Rows: 10, BytesTotal: 9150, RowsTotal: 10, Chunks: 1, ChunksAll: 2}},
		{"b begins", func() { b.Begin(Expected{Tables: 1, Chunks: 1, Bytes: 50, Rows: 5, Estimated: true}) },
			State{Phase: "a: data", Bytes: 150, Rows: 10, BytesTotal: 200, RowsTotal: 15, Chunks: 1, ChunksAll: 2}},
		{"b moves less", func() { b.Add(40, 5); b.Done(chunk, Done{Bytes: 40, Rows: 5, Planned: 50}) },
			State{Phase: "a: data", Bytes: 190, Rows: 15, BytesTotal: 190, RowsTotal: 15, Chunks: 2, ChunksAll: 2}},
	}
	for _, st := range steps {
		st.do()
		s := tr.State()
		got := State{Phase: s.Phase, Bytes: s.Bytes, Rows: s.Rows, BytesTotal: s.BytesTotal, RowsTotal: s.RowsTotal, Chunks: s.Chunks, ChunksAll: s.ChunksAll}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: %+v, want %+v", st.name, got, st.want)
		}
	}
	sum := tr.Summary()
	var tables []string
	for _, l := range sum.Largest {
		tables = append(tables, l.Table)
	}
	if want := []string{"a: t", "b: t"}; !reflect.DeepEqual(tables, want) {
		t.Errorf("largest tables %q, want %q (one per database)", tables, want)
	}
}
