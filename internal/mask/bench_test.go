package mask

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// BenchmarkWriter masks rows shaped like bench/devcopy.sh's people tables
// (email, full_name and phone masked), to price the rewriter per row:
// every value distinct, names that come round in turn (people: 5,000 of
// them), or names drawn at random from 3,600 (people_real).
func BenchmarkWriter(b *testing.B) {
	tb := &TableMask{name: "t", columns: 6, secret: []byte("bench")}
	for i, text := range []string{1: "email", 2: "name", 3: "phone"} {
		if text == "" {
			continue
		}
		r, err := ParseRule(text)
		if err != nil {
			b.Fatal(err)
		}
		tb.masked = append(tb.masked, column{index: i, rule: r, class: classText, utf8: true})
	}
	const rows = 100000
	for _, bc := range []struct {
		name   string
		names  int  // distinct full names
		random bool // drawn at random, else in turn
	}{{"distinct", rows, false}, {"names-cycle", 5000, false}, {"names-random", 3600, true}} {
		var in []byte
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < rows; i++ {
			n := i % bc.names
			if bc.random {
				n = rnd.IntN(bc.names)
			}
			in = fmt.Appendf(in, "%d\tuser%d@example.com\tFirstname%d Lastname%d\t+1-555-%07d\tCity %d\t2020-01-02\n", i, i, n/60, n%60, i, i%100)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			w := tb.Writer(io.Discard)
			for b.Loop() {
				if _, err := w.Write(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}

// BenchmarkMAC prices one keyed hash of a short value.
func BenchmarkMAC(b *testing.B) {
	k := newKeyer([]byte("bench"))
	v := []byte("user12345@example.com")
	b.ReportAllocs()
	for b.Loop() {
		k.mac(Email, v)
	}
}
