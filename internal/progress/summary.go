package progress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Summary is the end-of-run report: what moved, how fast, where the time
// went. --summary-json writes it for scripts; WriteText for people.
type Summary struct {
	Op          string  `json:"op"`
	Target      string  `json:"target"` // file or database
	WallSeconds float64 `json:"wall_s"`
	Tables      int     `json:"tables"`
	Chunks      int     `json:"chunks"`
	Rows        int64   `json:"rows"`
	RawBytes    int64   `json:"raw_bytes"`
	// CopyFormat is the COPY format the raw bytes are counted in
	// ("text", "binary", "text and binary"): a clone between servers of
	// one major moves binary COPY, an archive holds text, and the same
	// rows differ in size between them.
	CopyFormat  string      `json:"copy_format,omitempty"`
	StoredBytes int64       `json:"stored_bytes,omitempty"` // compressed, in the archive
	Sequences   int         `json:"sequences"`
	LargeObj    int         `json:"large_objects"`
	Codec       string      `json:"codec,omitempty"`
	RawPerSec   float64     `json:"raw_bytes_per_s"`
	RowsPerSec  float64     `json:"rows_per_s"`
	Phases      []PhaseTime `json:"phases"`
	Largest     []TableTime `json:"largest_tables"`
	Slowest     []Step      `json:"slowest_steps,omitempty"`
	// Globals and Databases are the parts of a whole-server run (restore
	// --all, clone --all); the fields above are their totals.
	Globals   *GlobalsSummary   `json:"globals,omitempty"`
	Databases []DatabaseSummary `json:"databases,omitempty"`
	// Failures are what a restore or clone with --keep-going could not
	// restore, each with what was skipped because of it; Failed, Skipped
	// and Kept count them (Kept: created without their owner or
	// tablespace).
	Failures []Failure `json:"failures,omitempty"`
	Failed   int       `json:"failed,omitempty"`
	Skipped  int       `json:"skipped,omitempty"`
	Kept     int       `json:"created_anyway,omitempty"`
}

// Failure is one object a --keep-going run could not restore: the
// server's error, and the objects skipped because they depend on it.
type Failure struct {
	Object  string   `json:"object"`
	Error   string   `json:"error"`
	Skipped []string `json:"skipped,omitempty"`
	Kept    bool     `json:"created_anyway,omitempty"`
}

// GlobalsSummary is what a whole-server run did with the globals.
type GlobalsSummary struct {
	Roles       int      `json:"roles_created"`
	Tablespaces int      `json:"tablespaces_created"`
	KeptRoles   []string `json:"roles_kept,omitempty"` // roles the target had, left as they are
}

// DatabaseSummary is one database of a whole-server run. Done says an
// earlier, interrupted run had finished it (nothing else is filled in);
// Resumed counts the steps an interrupted run had finished in it.
type DatabaseSummary struct {
	Name        string      `json:"name"`
	Done        bool        `json:"done_by_earlier_run,omitempty"`
	WallSeconds float64     `json:"wall_s"`
	Tables      int         `json:"tables"`
	Chunks      int         `json:"chunks"`
	Rows        int64       `json:"rows"`
	Sequences   int         `json:"sequences"`
	LargeObj    int         `json:"large_objects"`
	Resumed     int         `json:"resumed_steps,omitempty"`
	Phases      []PhaseTime `json:"phases,omitempty"`
}

// Step is one task of a run and how long it took.
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// PhaseTime is one phase of a run: when it started and how long it took.
// Busy is the time its tasks took summed over connections, where known.
type PhaseTime struct {
	Name    string        `json:"name"`
	Start   time.Duration `json:"start_ns"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Busy    time.Duration `json:"busy_ns,omitempty"`
	Items   int           `json:"items,omitempty"`
}

// TableTime is what one table moved and the time its chunks took, summed
// over the connections that moved them.
type TableTime struct {
	Table   string  `json:"table"`
	Bytes   int64   `json:"raw_bytes"`
	Rows    int64   `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// largestN is how many tables the summary names.
const largestN = 5

// Summary returns the tracker's part of the end-of-run report: wall time,
// phases as reported, and the largest tables. The caller fills in the
// totals it knows better (stored bytes, sequences, ...).
func (t *Tracker) Summary() Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	wall := time.Since(t.begin)
	s := Summary{Op: t.plan.Op, WallSeconds: wall.Seconds(), Tables: t.plan.Tables, Chunks: t.chunks,
		Rows: t.rows.Load(), RawBytes: t.bytes.Load()}
	for _, p := range t.phases {
		if p.Elapsed == 0 {
			p.Elapsed = wall - p.Start
		}
		s.Phases = append(s.Phases, p)
	}
	s.Largest = slices.Clone(t.largest)
	for _, tt := range t.tables {
		s.Largest = keepLargest(s.Largest, *tt)
	}
	return s
}

// keepLargest adds tt to l, the largest tables in summary order, keeping
// the first largestN. A table already in l has tt added to it. A table
// left out can never return: every table it would pass is complete.
func keepLargest(l []TableTime, tt TableTime) []TableTime {
	if i := slices.IndexFunc(l, func(e TableTime) bool { return e.Table == tt.Table }); i >= 0 {
		tt.Bytes, tt.Rows, tt.Seconds = tt.Bytes+l[i].Bytes, tt.Rows+l[i].Rows, tt.Seconds+l[i].Seconds
		l = slices.Delete(l, i, i+1)
	}
	i, _ := slices.BinarySearchFunc(l, tt, largerFirst)
	if i >= largestN {
		return l
	}
	l = slices.Insert(l, i, tt)
	return l[:min(len(l), largestN)]
}

// largerFirst orders tables as the summary names them: most bytes first,
// ties by name.
func largerFirst(a, b TableTime) int {
	if a.Bytes != b.Bytes {
		return cmp.Compare(b.Bytes, a.Bytes)
	}
	return strings.Compare(a.Table, b.Table)
}

// Finish computes the rates and emits the summary event (JSON output).
func (t *Tracker) Finish(s *Summary) {
	if s.WallSeconds > 0 {
		s.RawPerSec = float64(s.RawBytes) / s.WallSeconds
		s.RowsPerSec = float64(s.Rows) / s.WallSeconds
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(Event{Event: "summary", Summary: s})
}

// WriteJSON writes the summary to path, for scripts.
func (s *Summary) WriteJSON(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// WriteText writes the summary for people.
func (s *Summary) WriteText(w io.Writer) {
	verb := map[string]string{"dump": "dumped", "restore": "restored", "clone": "cloned"}[s.Op]
	if verb == "" {
		verb = s.Op
	}
	fmt.Fprintf(w, "%s %d tables in %d chunks, %s rows, %d sequences, %d large objects %s %s in %s\n",
		verb, s.Tables, s.Chunks, Count(s.Rows), s.Sequences, s.LargeObj, map[bool]string{true: "to", false: "into"}[s.Op == "dump"],
		s.Target, Dur(time.Duration(s.WallSeconds*float64(time.Second))))
	bytes := "  data:    " + Bytes(s.RawBytes) + " raw"
	if s.CopyFormat != "" {
		bytes += " (COPY " + s.CopyFormat + ")"
	}
	if s.StoredBytes > 0 {
		bytes += fmt.Sprintf(", %s stored (%s, %.1fx)", Bytes(s.StoredBytes), s.Codec, float64(s.RawBytes)/float64(s.StoredBytes))
	}
	fmt.Fprintf(w, "%s; %s/s, %s rows/s\n", bytes, Bytes(int64(s.RawPerSec)), Count(int64(s.RowsPerSec)))
	if len(s.Phases) > 0 {
		fmt.Fprintf(w, "  %-18s %9s %9s %9s %6s\n", "phase", "start", "wall", "busy", "items")
		for _, p := range s.Phases {
			busy, items := "", ""
			if p.Items > 0 {
				busy, items = Dur(p.Busy), fmt.Sprint(p.Items)
			}
			fmt.Fprintf(w, "  %-18s %9s %9s %9s %6s\n", p.Name, Dur(p.Start), Dur(p.Elapsed), busy, items)
		}
	}
	if len(s.Largest) > 0 {
		var l []string
		for _, t := range s.Largest {
			l = append(l, fmt.Sprintf("%s %s %s", t.Table, Bytes(t.Bytes), Dur(time.Duration(t.Seconds*float64(time.Second)))))
		}
		fmt.Fprintf(w, "  largest: %s\n", strings.Join(l, "; "))
	}
	if len(s.Slowest) > 0 {
		var l []string
		for _, st := range s.Slowest {
			l = append(l, fmt.Sprintf("%s %s", st.Name, Dur(time.Duration(st.Seconds*float64(time.Second)))))
		}
		fmt.Fprintf(w, "  slowest: %s\n", strings.Join(l, "; "))
	}
	s.writeFailures(w)
}

// writeFailures lists what a --keep-going run could not restore: one
// line per failed object with the server's error, its skipped dependents
// on the line under it, and the counts.
func (s *Summary) writeFailures(w io.Writer) {
	if len(s.Failures) == 0 {
		return
	}
	fmt.Fprintf(w, "not restored: %d failed, %d skipped because of them, %d created without their owner or tablespace\n", s.Failed, s.Skipped, s.Kept)
	for _, f := range s.Failures {
		if f.Kept {
			fmt.Fprintf(w, "  created anyway: %s: %s\n", f.Object, f.Error)
			continue
		}
		fmt.Fprintf(w, "  failed: %s: %s\n", f.Object, f.Error)
		if len(f.Skipped) > 0 {
			fmt.Fprintf(w, "    skipped because of it: %s\n", strings.Join(f.Skipped, ", "))
		}
	}
}

// Bytes formats a byte count with a binary unit.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Count formats a count with thousands separators, for rows.
func Count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Dur formats a duration: milliseconds under ten seconds, tenths above.
func Dur(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
