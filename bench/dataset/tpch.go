package dataset

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/sample"
	"golang.org/x/sync/errgroup"
)

// tpchTables is TPC-H's schema as its specification declares it.
var tpchTables = []struct{ name, columns string }{
	{"region", `r_regionkey integer NOT NULL, r_name char(25) NOT NULL, r_comment varchar(152) NOT NULL`},
	{"nation", `n_nationkey integer NOT NULL, n_name char(25) NOT NULL, n_regionkey integer NOT NULL, n_comment varchar(152) NOT NULL`},
	{"supplier", `s_suppkey integer NOT NULL, s_name char(25) NOT NULL, s_address varchar(40) NOT NULL, s_nationkey integer NOT NULL,
		s_phone char(15) NOT NULL, s_acctbal numeric(15,2) NOT NULL, s_comment varchar(101) NOT NULL`},
	{"customer", `c_custkey integer NOT NULL, c_name varchar(25) NOT NULL, c_address varchar(40) NOT NULL, c_nationkey integer NOT NULL,
		c_phone char(15) NOT NULL, c_acctbal numeric(15,2) NOT NULL, c_mktsegment char(10) NOT NULL, c_comment varchar(117) NOT NULL`},
	{"part", `p_partkey integer NOT NULL, p_name varchar(55) NOT NULL, p_mfgr char(25) NOT NULL, p_brand char(10) NOT NULL,
		p_type varchar(25) NOT NULL, p_size integer NOT NULL, p_container char(10) NOT NULL, p_retailprice numeric(15,2) NOT NULL,
		p_comment varchar(23) NOT NULL`},
	{"partsupp", `ps_partkey integer NOT NULL, ps_suppkey integer NOT NULL, ps_availqty integer NOT NULL,
		ps_supplycost numeric(15,2) NOT NULL, ps_comment varchar(199) NOT NULL`},
	{"orders", `o_orderkey bigint NOT NULL, o_custkey integer NOT NULL, o_orderstatus char(1) NOT NULL, o_totalprice numeric(15,2) NOT NULL,
		o_orderdate date NOT NULL, o_orderpriority char(15) NOT NULL, o_clerk char(15) NOT NULL, o_shippriority integer NOT NULL,
		o_comment varchar(79) NOT NULL`},
	{"lineitem", `l_orderkey bigint NOT NULL, l_partkey integer NOT NULL, l_suppkey integer NOT NULL, l_linenumber integer NOT NULL,
		l_quantity numeric(15,2) NOT NULL, l_extendedprice numeric(15,2) NOT NULL, l_discount numeric(15,2) NOT NULL,
		l_tax numeric(15,2) NOT NULL, l_returnflag char(1) NOT NULL, l_linestatus char(1) NOT NULL, l_shipdate date NOT NULL,
		l_commitdate date NOT NULL, l_receiptdate date NOT NULL, l_shipinstruct char(25) NOT NULL, l_shipmode char(10) NOT NULL,
		l_comment varchar(44) NOT NULL`},
}

// tpchKeys are the primary keys and secondary indexes (every foreign key
// column not already leading a key, and the date columns), built after
// the rows; tpchForeignKeys are the schema's foreign keys, added last.
var (
	tpchKeys = []string{
		`ALTER TABLE region ADD PRIMARY KEY (r_regionkey)`,
		`ALTER TABLE nation ADD PRIMARY KEY (n_nationkey)`,
		`ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey)`,
		`ALTER TABLE customer ADD PRIMARY KEY (c_custkey)`,
		`ALTER TABLE part ADD PRIMARY KEY (p_partkey)`,
		`ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey)`,
		`ALTER TABLE orders ADD PRIMARY KEY (o_orderkey)`,
		`ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber)`,
		`CREATE INDEX ON nation (n_regionkey)`,
		`CREATE INDEX ON supplier (s_nationkey)`,
		`CREATE INDEX ON customer (c_nationkey)`,
		`CREATE INDEX ON partsupp (ps_suppkey)`,
		`CREATE INDEX ON orders (o_custkey)`,
		`CREATE INDEX ON orders (o_orderdate)`,
		`CREATE INDEX ON lineitem (l_partkey, l_suppkey)`,
		`CREATE INDEX ON lineitem (l_suppkey)`,
		`CREATE INDEX ON lineitem (l_shipdate)`,
		`CREATE INDEX ON lineitem (l_commitdate)`,
		`CREATE INDEX ON lineitem (l_receiptdate)`,
	}
	tpchForeignKeys = []string{
		`ALTER TABLE nation ADD FOREIGN KEY (n_regionkey) REFERENCES region`,
		`ALTER TABLE supplier ADD FOREIGN KEY (s_nationkey) REFERENCES nation`,
		`ALTER TABLE customer ADD FOREIGN KEY (c_nationkey) REFERENCES nation`,
		`ALTER TABLE partsupp ADD FOREIGN KEY (ps_partkey) REFERENCES part`,
		`ALTER TABLE partsupp ADD FOREIGN KEY (ps_suppkey) REFERENCES supplier`,
		`ALTER TABLE orders ADD FOREIGN KEY (o_custkey) REFERENCES customer`,
		`ALTER TABLE lineitem ADD FOREIGN KEY (l_orderkey) REFERENCES orders`,
		`ALTER TABLE lineitem ADD FOREIGN KEY (l_partkey, l_suppkey) REFERENCES partsupp`,
	}
)

// TPCH builds TPC-H at scale factor sf (1 is about 1 GB of rows, 6
// million in lineitem) with the tpchgen-cli program at generator: one
// run of it writes every table's CSV in parts under scratch (each run
// first builds a 300 MB text pool, a CPU-second that one process per
// part paid again and again), the parts load into COPY on jobs
// connections at once, largest first, and are removed; then the primary
// keys and indexes, then the foreign keys, then ANALYZE. Real data for a
// benchmark, where pgbench's rows are mostly blanks: 8 tables, 8 foreign
// keys, 11 secondary indexes, dates, decimals and text.
func TPCH(ctx context.Context, generator, scratch, connString string, sf float64, jobs int) error {
	if _, err := exec.LookPath(generator); err != nil {
		return fmt.Errorf("TPC-H needs tpchgen-cli (pip install tpchgen-cli, or make bench-deps): %w", err)
	}
	jobs = max(jobs, 1)
	var create []string
	for _, t := range tpchTables {
		create = append(create, fmt.Sprintf("CREATE TABLE %s (%s)", t.name, t.columns))
	}
	if err := sample.ExecEach(ctx, connString, create...); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(scratch, "tpch-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := []string{"csv", "-q", "-n", strconv.Itoa(jobs), "-s", strconv.FormatFloat(sf, 'g', -1, 64),
		"--parts", strconv.Itoa(4 * jobs), "-o", dir}
	if out, err := exec.CommandContext(ctx, generator, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tpchgen-cli %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	type part struct {
		table, path string
		size        int64
	}
	var parts []part
	for _, t := range tpchTables {
		files, err := filepath.Glob(filepath.Join(dir, t.name, "*.csv"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("tpchgen-cli wrote no %s in %s", t.name, dir)
		}
		for _, f := range files {
			info, err := os.Stat(f)
			if err != nil {
				return err
			}
			parts = append(parts, part{t.name, f, info.Size()})
		}
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(b.size, a.size) })
	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan part)
	g.Go(func() error {
		defer close(queue)
		for _, p := range parts {
			select {
			case queue <- p:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range jobs {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, connString)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			for p := range queue {
				if err := copyFile(gctx, conn, p.path, "COPY "+p.table+" FROM STDIN (FORMAT csv, HEADER true)"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := sample.ExecParallel(ctx, connString, jobs, tpchKeys); err != nil {
		return err
	}
	if err := sample.ExecParallel(ctx, connString, jobs, tpchForeignKeys); err != nil {
		return err
	}
	return sample.ExecEach(ctx, connString, "ANALYZE")
}

// copyFile streams the file at path into the COPY ... FROM STDIN of sql.
func copyFile(ctx context.Context, conn *pgx.Conn, path, sql string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := conn.PgConn().CopyFrom(ctx, f, sql); err != nil {
		return fmt.Errorf("load %s: %w", filepath.Base(path), err)
	}
	return nil
}
