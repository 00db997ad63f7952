package dataset

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/sample"
)

// FKHeavy builds a schema where constraints dominate restore time: 24
// tables, 30 foreign keys (each table references one or two earlier ones,
// one self-reference), 60 indexes (24 primary keys and 36 secondary ones,
// FK columns included). Scale 1 is about 2.5 million rows (600 MB with its indexes).
func FKHeavy(ctx context.Context, connString string, scale float64) error {
	const tables = 24
	var stmts []string
	indexes, fks := tables, 0
	for i := 1; i <= tables; i++ {
		n := sample.Rows(50_000+25_000*(i%5), scale)
		cols := "id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2), created date, parent_a bigint, parent_b bigint, self_ref bigint"
		stmts = append(stmts,
			fmt.Sprintf("CREATE TABLE fk_t%02d (%s)", i, cols),
			fmt.Sprintf(`INSERT INTO fk_t%02d SELECT g, %s, (random()*1000)::numeric(12,2),
				date '2020-01-01' + (g %% 1000), NULL, NULL, NULL FROM generate_series(1, %d) g`, i, sample.RandomText(5, 20), n))
		if i > 1 {
			stmts = append(stmts,
				fmt.Sprintf("UPDATE fk_t%02d SET parent_a = 1 + (id %% (SELECT count(*) FROM fk_t%02d))", i, i-1),
				fmt.Sprintf("ALTER TABLE fk_t%02d ADD FOREIGN KEY (parent_a) REFERENCES fk_t%02d (id)", i, i-1),
				fmt.Sprintf("CREATE INDEX ON fk_t%02d (parent_a)", i))
			fks++
			indexes++
		}
		if i%4 == 0 {
			stmts = append(stmts,
				fmt.Sprintf("UPDATE fk_t%02d SET parent_b = 1 + (id %% (SELECT count(*) FROM fk_t%02d))", i, i/2),
				fmt.Sprintf("ALTER TABLE fk_t%02d ADD FOREIGN KEY (parent_b) REFERENCES fk_t%02d (id)", i, i/2),
				fmt.Sprintf("CREATE INDEX ON fk_t%02d (parent_b)", i))
			fks++
			indexes++
		}
	}
	stmts = append(stmts,
		"UPDATE fk_t01 SET self_ref = CASE WHEN id > 1 THEN id - 1 END",
		"ALTER TABLE fk_t01 ADD FOREIGN KEY (self_ref) REFERENCES fk_t01 (id)")
	fks++
	for i := 1; indexes < 60; i = i%tables + 1 {
		stmts = append(stmts, fmt.Sprintf("CREATE INDEX ON fk_t%02d (created, amount)", i))
		indexes++
		if indexes < 60 {
			stmts = append(stmts, fmt.Sprintf("CREATE INDEX ON fk_t%02d (name)", i))
			indexes++
		}
	}
	if fks != 30 {
		return fmt.Errorf("fk-heavy dataset has %d foreign keys, want 30", fks)
	}
	stmts = append(stmts, "VACUUM ANALYZE")
	return sample.ExecEach(ctx, connString, stmts...)
}
