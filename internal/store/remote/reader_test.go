package remote

import (
	"reflect"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store"
)

func TestCoalesce(t *testing.T) {
	r := func(off, n int64) store.Range { return store.Range{Off: off, Len: n} }
	cases := []struct {
		name   string
		in     []store.Range
		want   [][2]int64 // off, len of each request
		window int64
	}{
		{"adjacent", []store.Range{r(0, 10), r(10, 10), r(20, 5)}, [][2]int64{{0, 25}}, 100},
		{"small gap joined", []store.Range{r(0, 10), r(15, 10)}, [][2]int64{{0, 25}}, 100},
		{"large gap split", []store.Range{r(0, 10), r(100, 10)}, [][2]int64{{0, 10}, {100, 10}}, 1000},
		{"window split", []store.Range{r(0, 60), r(60, 60)}, [][2]int64{{0, 60}, {60, 60}}, 100},
		{"larger than window", []store.Range{r(0, 500)}, [][2]int64{{0, 500}}, 100},
		{"backwards split", []store.Range{r(50, 10), r(0, 10)}, [][2]int64{{50, 10}, {0, 10}}, 100},
		{"empty skipped", []store.Range{r(0, 0), r(3, 4)}, [][2]int64{{3, 4}}, 100},
	}
	for _, c := range cases {
		var got [][2]int64
		for _, q := range coalesce(c.in, c.window, 8) {
			got = append(got, [2]int64{q.off, q.n})
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
