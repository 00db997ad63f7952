package codec

import (
	"fmt"
	"strings"
	"testing"
)

// pgbenchBlock is 1 MiB of COPY text shaped like pgbench_accounts, the
// benchmark's big table: two integers, a zero and an 84-blank filler.
func pgbenchBlock() []byte {
	var b strings.Builder
	for i := 1; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "%d\t%d\t0\t%84s\n", i, i/100000+1, "")
	}
	return []byte(b.String())
}

// BenchmarkCompress compares the codecs on one block: MB/s per core and,
// as a metric, the stored size in percent of the raw size. The pure Go
// zstd encoder is measured beside the build's default engine.
func BenchmarkCompress(b *testing.B) {
	src := pgbenchBlock()
	type variant struct {
		name string
		c    Codec
	}
	var vs []variant
	for _, spec := range []string{"zstd:1", "zstd:3", "lz4:1", "gzip:1", "gzip:6"} {
		c, err := Parse(spec)
		if err != nil {
			b.Fatal(err)
		}
		vs = append(vs, variant{spec + " " + c.Name(), c})
	}
	for _, l := range []int{1, 3} {
		vs = append(vs, variant{fmt.Sprintf("zstd:%d purego", l), &zstdCodec{level: l}})
	}
	for _, v := range vs {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			var out []byte
			var err error
			for b.Loop() {
				if out, err = v.c.Compress(out, src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*float64(len(out))/float64(len(src)), "%size")
		})
	}
}
