package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SubsetSQL creates schema app for the subset tests: composite (products,
// events), nullable (most), self (employees, customers) and cyclic (a, b)
// foreign keys, a partitioned table referenced and referencing (events),
// an inheritance child with a key of its own (vip_customers), a reference
// the schema does not declare (audit.user_ref to customers.id, given as
// SubsetRef) and an unrelated table (settings).
func SubsetSQL() string {
	return `
CREATE SCHEMA app;
CREATE TABLE app.employees (id int PRIMARY KEY, manager_id int REFERENCES app.employees);
CREATE TABLE app.customers (id int PRIMARY KEY, rep int REFERENCES app.employees, referrer int REFERENCES app.customers);
CREATE TABLE app.vip_customers (perk text) INHERITS (app.customers);
ALTER TABLE app.vip_customers ADD PRIMARY KEY (id), ADD FOREIGN KEY (rep) REFERENCES app.employees;
CREATE TABLE app.products (sku text, region int, PRIMARY KEY (sku, region));
CREATE TABLE app.a (id int PRIMARY KEY, b_id int);
CREATE TABLE app.b (id int PRIMARY KEY, a_id int REFERENCES app.a);
ALTER TABLE app.a ADD FOREIGN KEY (b_id) REFERENCES app.b DEFERRABLE INITIALLY DEFERRED;
CREATE TABLE app.events (id int, at date, customer_id int REFERENCES app.customers, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
CREATE TABLE app.events_2024 PARTITION OF app.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE app.events_2025 PARTITION OF app.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE app.orders (id int PRIMARY KEY, customer_id int REFERENCES app.customers, created date NOT NULL,
  a_id int REFERENCES app.a, event_id int, event_at date, FOREIGN KEY (event_id, event_at) REFERENCES app.events);
CREATE TABLE app.order_lines (order_id int REFERENCES app.orders, line int, sku text, region int,
  PRIMARY KEY (order_id, line), FOREIGN KEY (sku, region) REFERENCES app.products);
CREATE TABLE app.audit (id int PRIMARY KEY, user_ref int);
CREATE TABLE app.settings (k text PRIMARY KEY, v text);

BEGIN;
INSERT INTO app.employees SELECT i, NULLIF(i / 2, 0) FROM generate_series(1, 50) i;
INSERT INTO app.customers SELECT i, 1 + i % 50, CASE WHEN i % 3 = 0 THEN i - 1 END FROM generate_series(1, 200) i;
INSERT INTO app.vip_customers SELECT i, 1 + i % 7, NULL, 'lounge' FROM generate_series(1001, 1010) i;
INSERT INTO app.products SELECT 'p' || i, r FROM generate_series(1, 30) i, generate_series(1, 3) r;
INSERT INTO app.a SELECT i, 1 + i % 20 FROM generate_series(1, 20) i;
INSERT INTO app.b SELECT i, 1 + (i + 5) % 20 FROM generate_series(1, 20) i;
INSERT INTO app.events SELECT i, DATE '2024-01-01' + (i * 13) % 700, 1 + i % 200 FROM generate_series(1, 400) i;
INSERT INTO app.orders SELECT i, CASE WHEN i % 10 <> 0 THEN 1 + (i * 7) % 200 END, DATE '2024-01-01' + i,
  CASE WHEN i % 4 = 0 THEN 1 + i % 20 END, e.id, e.at
  FROM generate_series(1, 1000) i LEFT JOIN app.events e ON e.id = i % 400 AND i % 5 = 0;
INSERT INTO app.order_lines SELECT o, l, CASE WHEN l < 3 THEN 'p' || (1 + (o + l) % 30) END, 1 + l % 3
  FROM generate_series(1, 1000) o, generate_series(1, 3) l;
INSERT INTO app.audit SELECT i, 1 + (i * 3) % 200 FROM generate_series(1, 300) i;
INSERT INTO app.settings VALUES ('a', '1'), ('b', '2'), ('c', '3');
COMMIT;
ANALYZE;`
}

// SubsetRef is the virtual reference SubsetSQL's schema needs.
const SubsetRef = "app.audit(user_ref) -> app.customers(id)"

// SubsetTables are SubsetSQL's tables that hold rows, qualified.
var SubsetTables = []string{"app.employees", "app.customers", "app.vip_customers", "app.products", "app.a", "app.b",
	"app.events_2024", "app.events_2025", "app.orders", "app.order_lines", "app.audit", "app.settings"}

// subsetKeys are the primary key of each table of SubsetSQL's schema,
// partitioned events as one.
var subsetKeys = map[string][]string{
	"employees": {"id"}, "customers": {"id"}, "vip_customers": {"id"}, "products": {"sku", "region"}, "a": {"id"}, "b": {"id"},
	"events": {"id", "at"}, "orders": {"id"}, "order_lines": {"order_id", "line"}, "audit": {"id"}, "settings": {"k"},
}

// subsetRefs are its references, written out by hand: child, its
// columns, parent, its columns.
var subsetRefs = [][4]string{
	{"employees", "manager_id", "employees", "id"},
	{"customers", "rep", "employees", "id"},
	{"customers", "referrer", "customers", "id"},
	{"vip_customers", "rep", "employees", "id"},
	{"orders", "customer_id", "customers", "id"},
	{"orders", "a_id", "a", "id"},
	{"orders", "event_id,event_at", "events", "id,at"},
	{"order_lines", "order_id", "orders", "id"},
	{"order_lines", "sku,region", "products", "sku,region"},
	{"a", "b_id", "b", "id"},
	{"b", "a_id", "a", "id"},
	{"events", "customer_id", "customers", "id"},
	{"audit", "user_ref", "customers", "id"},
}

// SubsetExpected computes the rows a subset of SubsetSQL's schema keeps, by
// another method than internal/subset's: by primary key values, in
// temporary tables, every reference followed again until nothing is
// added. seeds maps a table (unqualified) to its condition; whole names
// the other tables kept whole. It returns the rows kept per table of
// SubsetTables.
func SubsetExpected(t testing.TB, connString string, seeds map[string]string, children bool, whole []string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := Connect(ctx, t, connString)
	exec := func(q string) int64 {
		tag, err := conn.Exec(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return tag.RowsAffected()
	}
	on := func(a, b string, acols, bcols []string) string {
		var parts []string
		for i := range acols {
			parts = append(parts, fmt.Sprintf("%s.%s = %s.%s", a, acols[i], b, bcols[i]))
		}
		return strings.Join(parts, " AND ")
	}
	for tbl, key := range subsetKeys {
		exec(fmt.Sprintf("CREATE TEMP TABLE k_%s AS SELECT %s FROM app.%s WITH NO DATA; ALTER TABLE k_%s ADD PRIMARY KEY (%s)",
			tbl, strings.Join(key, ", "), tbl, tbl, strings.Join(key, ", ")))
	}
	for tbl, cond := range seeds {
		exec(fmt.Sprintf("INSERT INTO k_%s SELECT %s FROM %s WHERE %s", tbl, strings.Join(subsetKeys[tbl], ", "), subsetFrom(tbl), cond))
	}
	follow := func(down bool) {
		for added := int64(1); added > 0; {
			added = 0
			for _, r := range subsetRefs {
				child, ccols, parent, pcols := r[0], strings.Split(r[1], ","), r[2], strings.Split(r[3], ",")
				from, to := "p", "c" // down: from kept parents to their children
				if !down {
					from, to = "c", "p"
				}
				table := map[string]string{"c": child, "p": parent}
				added += exec(fmt.Sprintf(`INSERT INTO k_%s SELECT DISTINCT %s FROM %s c JOIN %s p ON %s JOIN k_%s k ON %s ON CONFLICT DO NOTHING`,
					table[to], cols(to, subsetKeys[table[to]]), subsetFrom(child), subsetFrom(parent), on("p", "c", pcols, ccols),
					table[from], on("k", from, subsetKeys[table[from]], subsetKeys[table[from]])))
			}
		}
	}
	if children {
		follow(true)
	}
	for _, tbl := range whole {
		exec(fmt.Sprintf("INSERT INTO k_%s SELECT %s FROM %s ON CONFLICT DO NOTHING", tbl, strings.Join(subsetKeys[tbl], ", "), subsetFrom(tbl)))
	}
	follow(false)
	out := map[string]int64{}
	for _, q := range SubsetTables {
		tbl := strings.TrimPrefix(q, "app.")
		var n int64
		query := "SELECT count(*) FROM k_" + tbl
		if strings.HasPrefix(tbl, "events_") {
			query = "SELECT count(*) FROM k_events JOIN ONLY app." + tbl + " USING (id, at)"
		}
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[q] = n
	}
	return out
}

// subsetFrom reads a table of SubsetSQL's schema as a foreign key sees it:
// events with its partitions, any other without its inheritance children.
func subsetFrom(tbl string) string {
	if tbl == "events" {
		return "app.events"
	}
	return "ONLY app." + tbl
}

// cols qualifies columns with alias a.
func cols(a string, cs []string) string {
	q := make([]string, len(cs))
	for i, c := range cs {
		q[i] = a + "." + c
	}
	return strings.Join(q, ", ")
}

// Connect opens a connection to connString for a test's own queries,
// closed when the test ends.
func Connect(ctx context.Context, t testing.TB, connString string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
