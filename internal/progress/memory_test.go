package progress

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/heaptest"
)

// TestTrackerMemory bounds what a Tracker holds per table once a run of
// many small tables has reported them all, each in one unit: it ranks a
// whole table when it is done and keeps only the largest, where it kept
// every table to the end (106 bytes a table, 10.6 MB at 100,000). A table
// in several units is summed to the end, as before.
func TestTrackerMemory(t *testing.T) {
	const n = 100_000
	for _, tt := range []struct {
		name  string
		whole bool
		max   int64 // bytes per table
	}{
		{"whole tables", true, 1},
		{"chunks", false, 120},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker("restore")
			before := heaptest.Live()
			for i := range n {
				name := fmt.Sprintf(`"public"."small_%06d"`, i)
				w := Work{Kind: "data", Table: name, Name: name, Whole: tt.whole}
				tr.Start(w)
				tr.Done(w, Done{Bytes: 300, Rows: 10, Elapsed: time.Millisecond})
			}
			// Nothing held per table can leave the heap a little
			// smaller than it was.
			per := max(0, int64(heaptest.Live())-int64(before)) / n
			runtime.KeepAlive(tr)
			t.Logf("%d bytes per table", per)
			if per > tt.max {
				t.Errorf("the tracker holds %d bytes per table, want at most %d", per, tt.max)
			}
		})
	}
}

// TestSummaryLargestWhole: the largest tables of a run whose tables come
// in one unit or several, in any order, are those a sum over every table
// gives, ties by name.
func TestSummaryLargestWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tr := NewTracker("restore")
	sums := map[string]*TableTime{}
	type unit struct {
		w Work
		d Done
	}
	var units []unit
	for i := range 300 {
		name := fmt.Sprintf("t%03d", i)
		parts := 1 + rng.IntN(3)
		for range parts {
			d := Done{Bytes: int64(rng.IntN(40)), Rows: int64(rng.IntN(5)), Elapsed: time.Duration(rng.IntN(1000))}
			units = append(units, unit{Work{Kind: "data", Table: name, Name: name, Whole: parts == 1}, d})
			if sums[name] == nil {
				sums[name] = &TableTime{Table: name}
			}
			s := sums[name]
			s.Bytes, s.Rows, s.Seconds = s.Bytes+d.Bytes, s.Rows+d.Rows, s.Seconds+d.Elapsed.Seconds()
		}
	}
	rng.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
	for _, u := range units {
		tr.Done(u.w, u.d)
	}
	var want []TableTime
	for _, s := range sums {
		want = append(want, *s)
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].Bytes != want[j].Bytes {
			return want[i].Bytes > want[j].Bytes
		}
		return want[i].Table < want[j].Table
	})
	want = want[:largestN]
	if got := tr.Summary().Largest; !reflect.DeepEqual(got, want) || len(got) != largestN {
		t.Errorf("largest %+v, want %+v", got, want)
	}
}
