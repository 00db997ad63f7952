package subset

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestMain stops the shared cluster (pgtest.Shared) once every test has
// run.
func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCompute computes subsets of a schema with composite, nullable, self
// and cyclic foreign keys, a partitioned table, an inheritance child and a
// virtual reference, and checks each table's kept rows against a closure
// computed by another method (pgtest.SubsetExpected: primary keys in
// temporary tables) and that the chunks Apply plans read exactly those
// rows, in the snapshot.
func TestCompute(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.DB(t, c, "subset")
	if err := c.Exec(ctx, db, pgtest.SubsetSQL()); err != nil {
		t.Fatal(err)
	}
	ref, err := ParseRef(pgtest.SubsetRef)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		spec     Spec
		seeds    map[string]string // for SubsetExpected
		children bool
		whole    []string // other tables kept whole
		warn     string   // in the warnings, "" for none
	}{
		{name: "parents, others all", spec: Spec{Seeds: []Seed{{"app.orders", "created >= '2026-09-01'"}}, Refs: []Ref{ref}},
			seeds: map[string]string{"orders": "created >= '2026-09-01'"}, whole: []string{"order_lines", "products", "vip_customers", "audit", "settings"},
			warn: `order_lines\" references \"app\".\"orders\" but no rule reaches it`}, // quoted by the text handler
		{name: "children, others all", spec: Spec{Seeds: []Seed{{"app.orders", "created >= '2026-09-01'"}}, Children: true, Refs: []Ref{ref}},
			seeds: map[string]string{"orders": "created >= '2026-09-01'"}, children: true, whole: []string{"vip_customers", "audit", "settings"}},
		{name: "others none", spec: Spec{Seeds: []Seed{{"app.orders", "created >= '2026-09-01'"}}, Others: OthersNone},
			seeds: map[string]string{"orders": "created >= '2026-09-01'"}},
		{name: "self and virtual children", spec: Spec{Seeds: []Seed{{`"app".employees`, "id = 3"}}, Children: true, Others: OthersNone, Refs: []Ref{ref}},
			seeds: map[string]string{"employees": "id = 3"}, children: true},
		{name: "cycle and partitions", spec: Spec{Seeds: []Seed{{"app.b", "id IN (2, 3)"}, {"app.events", "id < 30"}}, Others: OthersNone},
			seeds: map[string]string{"b": "id IN (2, 3)", "events": "id < 30"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := pgtest.SubsetExpected(t, c.ConnString(db), tc.seeds, tc.children, tc.whole)
			var warnings bytes.Buffer
			got := keptRows(t, c.ConnString(db), tc.spec, slog.New(slog.NewTextHandler(&warnings, nil)))
			if tc.warn == "" && warnings.Len() > 0 || !strings.Contains(warnings.String(), tc.warn) {
				t.Errorf("warnings %q, want %q", warnings.String(), tc.warn)
			}
			for _, tbl := range pgtest.SubsetTables {
				if got[tbl] != want[tbl] {
					t.Errorf("%s: kept %d rows, the closure in SQL %d", tbl, got[tbl], want[tbl])
				}
			}
			if want["app.customers"] == 0 {
				t.Fatalf("the case keeps no customer: %v", want)
			}
		})
	}
}

// keptRows computes spec in a snapshot and reads, in that snapshot, the
// rows each table's planned chunks select (Apply), as a dump worker does.
func keptRows(t *testing.T, connString string, spec Spec, log *slog.Logger) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(ctx, conn, spec, Options{Server: srv, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pg.ListTables(ctx, conn, srv)
	if err != nil {
		t.Fatal(err)
	}
	chunks := make([][]chunk.Chunk, len(tables))
	for i, tb := range tables {
		chunks[i] = []chunk.Chunk{{Where: tb.Where}}
	}
	rec := plan.Apply(tables, chunks)
	if rec.Others == "" || len(rec.Seeds) != len(spec.Seeds) {
		t.Fatalf("record %+v", rec)
	}
	out := map[string]int64{}
	for i, tb := range tables {
		for _, ch := range chunks[i] {
			where := ch.Where
			switch {
			case ch.Keep != "" && where != "":
				where = "(" + where + ") AND " + ch.Keep
			case ch.Keep != "":
				where = ch.Keep
			}
			q := "SELECT count(*) FROM (" + chunk.SelectSQL(tb.Schema, tb.Name, tb.Columns, where) + ") s"
			var n int64
			if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			out[tb.Schema+"."+tb.Name] += n
		}
	}
	return out
}

// TestKeepChunks cuts row ids into chunks at block boundaries, each
// naming its rows, and a table without kept rows into one that reads
// none.
// TestTidArgs checks the page range sent beside row ids: the rows' own
// where they fill their pages, every row id where a few thousand are
// spread thin (read by a TID scan), and the rows' own again past
// sparseRows.
func TestTidArgs(t *testing.T) {
	every := [2]pgtype.TID{tid(0).pg(), tid(math.MaxUint32<<16 | math.MaxUint16).pg()}
	rows := func(n, step int) []tid {
		out := make([]tid, n)
		for i := range out {
			out[i] = tid(uint64(i*step/100)<<16 | uint64(1+i%100))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		rows []tid
		all  bool
	}{
		{"dense", rows(3000, 1), false},
		{"one row", rows(1, 1), false},
		{"spread thin", rows(3000, 400), true},
		{"spread thin, past sparseRows", rows(sparseRows+1, 400), false},
	} {
		args := tidArgs(tc.rows)
		got := [2]pgtype.TID{args[1].(pgtype.TID), args[2].(pgtype.TID)}
		own := [2]pgtype.TID{slices.Min(tc.rows).pg(), slices.Max(tc.rows).pg()}
		if want := map[bool][2]pgtype.TID{true: every, false: own}[tc.all]; got != want {
			t.Errorf("%s: range %v, want %v", tc.name, got, want)
		}
	}
}

func TestKeepChunks(t *testing.T) {
	var rows []tid
	for b := range uint32(30) {
		for o := range uint16(4000) {
			rows = append(rows, tid(uint64(b)<<16|uint64(o+1)))
		}
	}
	cs := keepChunks(rows, "", 10)
	if len(cs) < 2 {
		t.Fatalf("%d chunks for %d rows", len(cs), len(rows))
	}
	if cs[0].Where != "ctid < '(13,0)'" || !strings.HasPrefix(cs[1].Where, "ctid >= '(13,0)'") || strings.Contains(cs[len(cs)-1].Where, "<") {
		t.Errorf("page ranges: %q, %q, ..., %q", cs[0].Where, cs[1].Where, cs[len(cs)-1].Where)
	}
	if !strings.HasPrefix(cs[0].Keep, `ctid = ANY ('{"(0,1)","(0,2)"`) || cs[0].Size != 52000*10 {
		t.Errorf("first chunk: size %d, keep %.40s", cs[0].Size, cs[0].Keep)
	}
	if cs := keepChunks(nil, "x > 1", 10); len(cs) != 1 || cs[0].Keep != "false" || cs[0].Where != "x > 1" {
		t.Errorf("no rows: %+v", cs)
	}
}

// TestParse reads --subset, --subset-ref and --subset-others values.
func TestParse(t *testing.T) {
	s, err := ParseSeed(`"My: schema".orders: created > now() - interval '30 days'`)
	if err != nil || s.Table != `"My: schema".orders` || s.Where != "created > now() - interval '30 days'" {
		t.Errorf("seed %+v, %v", s, err)
	}
	r, err := ParseRef(`app.events(user_id, "Org") -> "App".Users(id, org)`)
	if err != nil || r.Child != "app.events" || r.Parent != `"App".Users` || strings.Join(r.ChildColumns, "|") != "user_id|Org" || strings.Join(r.ParentColumns, "|") != "id|org" {
		t.Errorf("ref %+v, %v", r, err)
	}
	for _, bad := range []string{"app.orders", "app.orders:", ": x"} {
		if _, err := ParseSeed(bad); err == nil {
			t.Errorf("seed %q accepted", bad)
		}
	}
	for _, bad := range []string{"a(x) b(y)", "a(x) -> b(y, z)", "a -> b(y)", `a("x) -> b(y)`} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ref %q accepted", bad)
		}
	}
	if _, err := ParseOthers("some"); err == nil {
		t.Error("--subset-others some accepted")
	}
}

// TestReadFileErrors: a --subset-file's mistakes name the flag, the file
// and its line once, and the rule as the file spells it (not the flag
// that spells it otherwise).
func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.rules")
	for _, tc := range []struct{ text, want string }{
		{"# rules\nsubset app.orders\n", `--subset-file PATH line 2: subset "app.orders": want 'schema.table: WHERE-condition'`},
		{"ref a(x) b(y)\n", `--subset-file PATH line 1: ref "a(x) b(y)": want 'schema.table(column, ...) -> schema.table(column, ...)'`},
		{"others some\n", `--subset-file PATH line 1: others "some": want all or none`},
		{"\nkeep x\n", `--subset-file PATH line 2: unknown rule "keep" (want subset, ref, children or others)`},
		{"", "--subset-file " + missing + ": no such file or directory"},
	} {
		path := missing
		if tc.text != "" {
			path = filepath.Join(dir, "r.rules")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		err := ReadFile(path, &Spec{})
		if want := strings.ReplaceAll(tc.want, "PATH", path); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", tc.text, err, want)
		}
	}
}

// chainSQL creates schema big for TestComputeChains: a self reference
// 5,000 rows long (chain row k references k-1, but row 4001 references
// 5000, so rows 4001-5000 are a cycle), its column indexed (without, each
// link down the chain reads the table: 4,000 links, 2.5 s), tables with more rows than one
// query of the old batches followed (items 30,000, notes 40,000), rows
// referenced along several edges (an item's hub_id and hub2, a note's
// item and its reply_to, itself a short self-reference chain), an
// indexed reference (item's chain_id: followed down from thousands of
// chain rows by a filter the index serves), and a
// chain (coin) whose key type has no hashing, which a recursive query
// cannot follow.
const chainSQL = `
CREATE SCHEMA big;
CREATE TABLE big.chain (id int PRIMARY KEY, prev int REFERENCES big.chain);
CREATE INDEX ON big.chain (prev);
CREATE TABLE big.hub (id int PRIMARY KEY);
CREATE TABLE big.item (id int PRIMARY KEY, hub_id int NOT NULL REFERENCES big.hub, hub2 int REFERENCES big.hub, chain_id int REFERENCES big.chain);
CREATE INDEX ON big.item (chain_id);
CREATE TABLE big.note (id int PRIMARY KEY, item_id int REFERENCES big.item, reply_to int REFERENCES big.note);
CREATE TABLE big.coin (id money PRIMARY KEY, prev money REFERENCES big.coin);
INSERT INTO big.coin SELECT i::numeric::money, NULLIF(i - 1, 0)::numeric::money FROM generate_series(1, 300) i;
INSERT INTO big.chain SELECT i, CASE WHEN i = 4001 THEN 5000 ELSE NULLIF(i - 1, 0) END FROM generate_series(1, 5000) i;
INSERT INTO big.hub SELECT generate_series(1, 40);
INSERT INTO big.item SELECT i, 1 + i % 40, CASE WHEN i % 3 = 0 THEN 1 + (i / 40) % 40 END, CASE WHEN i % 2 = 0 THEN 1 + i % 5000 END
  FROM generate_series(1, 30000) i;
INSERT INTO big.note SELECT i, CASE WHEN i % 11 <> 0 THEN 1 + (i * 7) % 30000 END, CASE WHEN i % 5 <> 1 THEN i - 1 END
  FROM generate_series(1, 40000) i;
ANALYZE;`

// chainRefs are chainSQL's foreign keys, by hand: child, its column,
// parent, its column.
var chainRefs = [][4]string{
	{"chain", "prev", "chain", "id"}, {"item", "hub_id", "hub", "id"}, {"item", "hub2", "hub", "id"}, {"item", "chain_id", "chain", "id"},
	{"note", "item_id", "item", "id"}, {"note", "reply_to", "note", "id"}, {"coin", "prev", "coin", "id"},
}

// chainTables are chainSQL's tables, unqualified.
var chainTables = []string{"chain", "hub", "item", "note", "coin"}

// chainVirtual is a virtual reference of chainSQL's schema to columns
// that are not unique: a note whose reply_to is n references every item
// whose hub2 is n. A row it brings down has other parents than the one
// it came from.
var chainVirtual = [4]string{"note", "reply_to", "item", "hub2"}

// TestComputeChains computes subsets of chainSQL's schema, whose self
// reference is 5,000 rows long and whose tables have more rows than the
// old batches, and checks each table's kept rows against a closure
// computed in memory by key (chainExpected).
func TestComputeChains(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.DB(t, c, "subset chains")
	if err := c.Exec(ctx, db, chainSQL); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		seeds    map[string]string
		children bool
		others   string
		virtual  bool             // with chainVirtual
		want     map[string]int64 // some counts, known by construction
		log      []string         // in the Debug log (PostgreSQL 14+)
	}{
		{name: "chain up", seeds: map[string]string{"chain": "id = 4000"}, others: OthersNone,
			want: map[string]int64{"big.chain": 4000, "big.item": 0}, log: []string{`subset closure" queries=2 `, `what="follow chain_prev_fkey to the end of its chain in memory" args=1 rows=3999`}},
		{name: "chain without hashing", seeds: map[string]string{"coin": "id = 300::numeric::money"}, others: OthersNone,
			want: map[string]int64{"big.coin": 300}, log: []string{"no recursive query along a self reference"}},
		{name: "chain up into its cycle", seeds: map[string]string{"chain": "id = 4500"}, others: OthersNone,
			want: map[string]int64{"big.chain": 1000}, log: []string{`what="follow chain_prev_fkey to the end of its chain" args=1 rows=1000`}}, // walkLimit rows: by the recursive query
		{name: "chain down, big batches", seeds: map[string]string{"chain": "id = 1"}, children: true, others: OthersNone,
			log: []string{`what="follow chain_prev_fkey to its children, to the end of its chain in memory" args=1 rows=3999`,
				`what="follow note_item_id_fkey to its children" args=12000 `,                                     // one query for more than 10,000 rows
				`what="follow item_chain_id_fkey to its children by their parents' keys" args=4000 rows=12000 `}}, // by the index
		{name: "hubs down, several edges", seeds: map[string]string{"hub": "id <= 2"}, children: true, others: OthersNone,
			log: []string{`what="follow item_hub_id_fkey, item_hub2_fkey to their children" args=4 `}}, // one scan of item
		{name: "notes up, others all", seeds: map[string]string{"note": "id % 7 = 0"}, others: OthersAll,
			log: []string{`what="follow note_item_id_fkey by its keys" args=`}}, // the parents by their key's index
		{name: "notes up, many", seeds: map[string]string{"note": "id % 7 <> 0"}, others: OthersNone,
			log: []string{`what="follow note_item_id_fkey" args=`}}, // past keyedParents: a join
		{name: "virtual reference to a column not unique", seeds: map[string]string{"item": "id = 3"}, children: true, others: OthersNone, virtual: true,
			log: []string{`what="follow note_item_id_fkey, --subset-ref big.note(reply_to) -> big.item(hub2) to their children"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Children: tc.children, Others: tc.others}
			for tbl, cond := range tc.seeds {
				spec.Seeds = append(spec.Seeds, Seed{"big." + tbl, cond})
			}
			refs := chainRefs
			if tc.virtual {
				v := chainVirtual
				ref, err := ParseRef(fmt.Sprintf("big.%s(%s) -> big.%s(%s)", v[0], v[1], v[2], v[3]))
				if err != nil {
					t.Fatal(err)
				}
				spec.Refs = []Ref{ref}
				refs = append(slices.Clip(refs), v)
			}
			want := chainExpected(t, c.ConnString(db), refs, tc.seeds, tc.children, tc.others == OthersAll)
			for tbl, n := range tc.want {
				if want[tbl] != n {
					t.Fatalf("the closure in memory keeps %d rows of %s, want %d", want[tbl], tbl, n)
				}
			}
			start := time.Now()
			var log bytes.Buffer
			got := keptRows(t, c.ConnString(db), spec, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
			t.Logf("computed and read in %s", time.Since(start).Round(time.Millisecond))
			for tbl, n := range want {
				if got[tbl] != n {
					t.Errorf("%s: kept %d rows, the closure in memory %d", tbl, got[tbl], n)
				}
			}
			for _, l := range tc.log {
				if c.Version() < 14 {
					break // steps of 10,000 rows, no recursive query
				}
				if !strings.Contains(log.String(), l) {
					t.Errorf("the log has no %q:\n%s", l, log.String())
				}
			}
		})
	}
}

// chainExpected computes the rows a subset of chainSQL's schema with
// references refs keeps, by another method than Compute's: every table's
// ids and references read into memory, the rules applied by key. It
// returns the kept rows per table, qualified.
func chainExpected(t *testing.T, connString string, refs [][4]string, seeds map[string]string, children, whole bool) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := pgtest.Connect(ctx, t, connString)
	ids := func(q string) []string {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// parentsOf[r][child id] are the parent ids along ref r; childrenOf
	// the reverse.
	parentsOf := make([]map[string][]string, len(refs))
	childrenOf := make([]map[string][]string, len(refs))
	for i, r := range refs {
		parentsOf[i], childrenOf[i] = map[string][]string{}, map[string][]string{}
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT c.id::text, p.id::text FROM big.%s c JOIN big.%s p ON p.%s = c.%s", r[0], r[2], r[3], r[1]))
		if err != nil {
			t.Fatal(err)
		}
		var id, p string
		if _, err := pgx.ForEachRow(rows, []any{&id, &p}, func() error {
			parentsOf[i][id] = append(parentsOf[i][id], p)
			childrenOf[i][p] = append(childrenOf[i][p], id)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	kept := map[string]map[string]bool{}
	var queue [][2]string // table, id
	keep := func(tbl string, id string) {
		if kept[tbl] == nil {
			kept[tbl] = map[string]bool{}
		}
		if !kept[tbl][id] {
			kept[tbl][id] = true
			queue = append(queue, [2]string{tbl, id})
		}
	}
	for tbl, cond := range seeds {
		for _, id := range ids(fmt.Sprintf("SELECT id::text FROM big.%s WHERE %s", tbl, cond)) {
			keep(tbl, id)
		}
	}
	// follow keeps the rows the queued ones reference (down: the rows
	// referencing them), to the end.
	follow := func(down bool) {
		for len(queue) > 0 {
			tbl, id := queue[0][0], queue[0][1]
			queue = queue[1:]
			for i, r := range refs {
				switch {
				case down && r[2] == tbl:
					for _, ch := range childrenOf[i][id] {
						keep(r[0], ch)
					}
				case !down && r[0] == tbl:
					for _, p := range parentsOf[i][id] {
						keep(r[2], p)
					}
				}
			}
		}
	}
	// The tables the rules reach, by the schema: the seeds', those below
	// them (with children), and those above any of these.
	reached := map[string]bool{}
	for tbl := range seeds {
		reached[tbl] = true
	}
	for _, down := range []bool{true, false} {
		for grown := true; grown && (children || !down); {
			grown = false
			for _, r := range refs {
				from, to := r[0], r[2]
				if down {
					from, to = to, from
				}
				if reached[from] && !reached[to] {
					reached[to], grown = true, true
				}
			}
		}
	}
	if children {
		follow(true)
	}
	for _, tbl := range chainTables {
		if whole && !reached[tbl] {
			for _, id := range ids("SELECT id::text FROM big." + tbl) {
				keep(tbl, id)
			}
		}
	}
	queue = queue[:0]
	for _, k := range slices.Sorted(maps.Keys(kept)) {
		for id := range kept[k] {
			queue = append(queue, [2]string{k, id})
		}
	}
	follow(false)
	out := map[string]int64{}
	for _, tbl := range chainTables {
		out["big."+tbl] = int64(len(kept[tbl]))
	}
	return out
}
