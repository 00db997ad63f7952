package dataset

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/sample"
)

// ManyTables is the number of tables Many builds.
const ManyTables = 60

// Many builds 60 tables of mixed sizes, three of which hold most of the
// data (about 90% of the rows), as in a typical application database: a
// few large fact tables and many small ones. Each table has a bigint
// primary key, text of varying length, numbers and timestamps; the three
// large ones also have a secondary index. Scale 1 is about 1.7 million
// rows, about 300 MB with indexes.
func Many(ctx context.Context, connString string, scale float64) error {
	var stmts []string
	for i := 1; i <= ManyTables; i++ {
		n := sample.Rows(100*(1+(i*7)%57), scale)
		if i%20 == 0 { // many_20, many_40, many_60
			n = sample.Rows(500_000, scale)
		}
		stmts = append(stmts,
			fmt.Sprintf(`CREATE TABLE many_%02d (id bigint PRIMARY KEY, account int NOT NULL, label text,
				amount numeric(12,2), created timestamptz, payload text)`, i),
			fmt.Sprintf(`INSERT INTO many_%02d SELECT g, (random()*10000)::int, %s, (random()*10000)::numeric(12,2),
				timestamptz '2022-01-01' + random() * interval '700 days', %s FROM generate_series(1, %d) g`,
				i, sample.RandomText(5, 20), sample.RandomText(20, 120), n))
		if i%20 == 0 {
			stmts = append(stmts, fmt.Sprintf("CREATE INDEX ON many_%02d (account, created)", i))
		}
	}
	stmts = append(stmts, "VACUUM ANALYZE")
	return sample.ExecEach(ctx, connString, stmts...)
}
