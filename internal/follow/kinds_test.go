package follow

import (
	"context"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// testKinds: each kind of difference finish can meet is named as what it
// is, from the source's catalog, and rows with writes since the catch-up
// read as writes that went on. It runs on TestFinishFenced's cluster.
func testKinds(t *testing.T, c *pgtest.Instance) {
	ctx := context.Background()
	o := newCase(t, c, `CREATE TABLE t (id int PRIMARY KEY); CREATE UNLOGGED TABLE u (id int);
		CREATE MATERIALIZED VIEW m AS SELECT 1 AS x; CREATE TABLE "Odd ""name" (id int)`)
	diff := func(keys ...string) []compare.Pair {
		var out []compare.Pair
		for _, k := range keys {
			out = append(out, compare.Pair{Key: k, A: "rows=1", B: "rows=2", InA: true, InB: true})
		}
		return out
	}
	writes := func(n int64) func(context.Context) (int64, error) {
		return func(context.Context) (int64, error) { return n, nil }
	}
	for _, tc := range []struct {
		name    string
		schema  bool
		entries []compare.Pair
		writes  int64
		want    []string
	}{
		{name: "ddl", schema: true, entries: []compare.Pair{{Key: "public.added", A: "rows=0", InA: true}},
			want: []string{"DDL: the schemas differ (DDL the follow did not replay: run on the target, or on a source without the DDL capture)", "DDL: relations on one side only: public.added"}},
		{name: "unlogged", entries: diff("public.u"), want: []string{"unlogged tables (their changes are not followed): public.u"}},
		{name: "materialized view", entries: diff("public.m"), want: []string{"materialized view contents (their rows are not replicated, only a REFRESH run on the source is: REFRESH MATERIALIZED VIEW each on the source, then finish again): public.m"}},
		{name: "large object", entries: diff("large object 16400"), want: []string{"large objects changed after finish copied them: 16400"}},
		{name: "rows", entries: diff(`public."Odd ""name"`), want: []string{`rows of public."Odd ""name"`}},
		{name: "writes went on", entries: diff("public.t"), writes: 3,
			want: []string{"writes that went on: the source took 3 transaction ids after the target caught up, and the rows of public.t differ"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Kinds(ctx, o.Source, tc.schema, tc.entries, Verification{Writes: writes(tc.writes)})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Kinds:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
