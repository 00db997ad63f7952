// Package compare compares two databases the way a DBA would trust: the
// schema as pg_dump prints it, and every table's rows by count and an
// order-independent content hash, with sequences and large objects.
package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// fingerprintSettings pin every setting that changes the text form of a
// value, so that two databases (or two clusters) holding the same data yield
// the same hashes; row_security=off makes a fingerprint taken by a role that
// RLS would filter fail loudly instead of hashing a subset.
func fingerprintSettings() []string {
	return []string{
		"SET LOCAL TimeZone = 'UTC'",
		"SET LOCAL DateStyle = 'ISO, MDY'",
		"SET LOCAL IntervalStyle = 'postgres'",
		"SET LOCAL extra_float_digits = 1",
		"SET LOCAL bytea_output = 'hex'",
		"SET LOCAL search_path = pg_catalog",
		"SET LOCAL row_security = off",
	}
}

// Fingerprint summarizes all user data of the database behind connString, so
// that a restored database can be compared to its source without shipping
// the data around. Keys are:
//
//   - every table (relkind r: plain, partition, inheritance child, unlogged)
//     and materialized view outside pg_catalog, information_schema and the
//     toast/temp schemas, as a quoted qualified name: "rows=N md5=H", where H
//     is an order-independent hash of the row texts read FROM ONLY that
//     relation; unpopulated materialized views map to "not populated";
//   - every sequence, same naming: "last_value=N is_called=B";
//   - every large object, as "large object OID": owner, ACL, comment, size
//     and md5 of its bytes.
//
// Everything is read in one REPEATABLE READ snapshot. It needs a role that
// can read everything (normally the superuser).
func Fingerprint(ctx context.Context, connString string) (map[string]string, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return FingerprintParallel(ctx, cfg, 1)
}

// FingerprintParallel is Fingerprint with relations hashed on jobs
// connections at once, all importing one exported snapshot, so that a large
// database is compared in a fraction of the time and still at one instant.
func FingerprintParallel(ctx context.Context, cfg *pgx.ConnConfig, jobs int) (map[string]string, error) {
	return fingerprint(ctx, cfg, jobs, "")
}

// FingerprintSnapshot is FingerprintParallel read in snapshot, exported and
// held by another session, so that a copy taken in it (clone --snapshot)
// can be compared with its source as of that instant while the source
// keeps changing. Sequences are not transactional: their values are the
// latest, whatever the snapshot.
func FingerprintSnapshot(ctx context.Context, cfg *pgx.ConnConfig, jobs int, snapshot string) (map[string]string, error) {
	if snapshot == "" {
		return nil, fmt.Errorf("fingerprint: no snapshot given")
	}
	return fingerprint(ctx, cfg, jobs, snapshot)
}

// fingerprint reads every relation in snapshot, or in a snapshot of its
// own when snapshot is empty.
func fingerprint(ctx context.Context, cfg *pgx.ConnConfig, jobs int, snapshot string) (map[string]string, error) {
	leader, err := snapshotConn(ctx, cfg, snapshot)
	if err != nil {
		return nil, err
	}
	defer leader.Close(context.WithoutCancel(ctx))
	snap := snapshot
	if snap == "" {
		if err := leader.QueryRow(ctx, "SELECT pg_catalog.pg_export_snapshot()").Scan(&snap); err != nil {
			return nil, fmt.Errorf("export snapshot: %w", err)
		}
	}
	rels, err := listRelations(ctx, leader)
	if err != nil {
		return nil, err
	}
	fp := make(map[string]string, len(rels))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		connect := func(ctx context.Context) (*pgx.Conn, error) { return snapshotConn(ctx, cfg, snap) }
		return pg.Parallel(gctx, jobs, rels, connect, func(ctx context.Context, conn *pgx.Conn, work <-chan relation) error {
			n := 0
			for r := range work {
				// Every relation read keeps its lock until the
				// transaction ends: start a new one in the same
				// snapshot now and then, so that comparing many
				// tables needs no more lock slots than pg_dump.
				if n++; n%relationsPerTransaction == 0 {
					if err := renewSnapshot(ctx, conn, snap); err != nil {
						return err
					}
				}
				v, err := hashRelation(ctx, conn, r)
				if err != nil {
					return pg.ExplainLost(err)
				}
				mu.Lock()
				fp[r.name] = v
				mu.Unlock()
			}
			return nil
		})
	})
	g.Go(func() error { return largeObjects(gctx, leader, fp, &mu) })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return fp, nil
}

// snapshotConn opens a read-only repeatable-read transaction with the
// settings that pin value text, importing snapshot when it is not empty.
func snapshotConn(ctx context.Context, cfg *pgx.ConnConfig, snapshot string) (*pgx.Conn, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := beginSnapshot(ctx, conn, snapshot); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// relationsPerTransaction is how many relations a hashing connection reads
// in one transaction before it ends it, releasing their locks, and imports
// the snapshot again.
const relationsPerTransaction = 20

// beginSnapshot begins conn's read-only repeatable-read transaction with
// the settings that pin value text, in snapshot when it is not empty.
func beginSnapshot(ctx context.Context, conn *pgx.Conn, snapshot string) error {
	stmts := []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
	if snapshot != "" {
		stmts = append(stmts, "SET TRANSACTION SNAPSHOT "+pg.Literal(snapshot))
	}
	for _, s := range append(stmts, fingerprintSettings()...) {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// renewSnapshot ends conn's transaction and begins another in snapshot,
// which the leader's open transaction keeps importable.
func renewSnapshot(ctx context.Context, conn *pgx.Conn, snapshot string) error {
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("release the locks of the relations hashed: %w", err)
	}
	return beginSnapshot(ctx, conn, snapshot)
}

// relation is one table, materialized view or sequence to fingerprint.
type relation struct {
	name      string
	kind      string
	populated bool
}

func listRelations(ctx context.Context, conn *pgx.Conn) ([]relation, error) {
	rows, err := conn.Query(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text, c.relispopulated
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'm', 'S')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
		ORDER BY pg_catalog.pg_relation_size(c.oid) DESC, 1`)
	if err != nil {
		return nil, fmt.Errorf("listing relations: %w", err)
	}
	rels, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (relation, error) {
		var x relation
		err := r.Scan(&x.name, &x.kind, &x.populated)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing relations: %w", err)
	}
	return rels, nil
}

// hashRelation returns a relation's fingerprint value.
func hashRelation(ctx context.Context, conn *pgx.Conn, r relation) (string, error) {
	switch {
	case r.kind == "S":
		var last int64
		var called bool
		if err := conn.QueryRow(ctx, "SELECT last_value, is_called FROM "+r.name).Scan(&last, &called); err != nil {
			return "", fmt.Errorf("reading sequence %s: %w", r.name, err)
		}
		return fmt.Sprintf("last_value=%d is_called=%t", last, called), nil
	case !r.populated:
		return "not populated", nil
	}
	// ROW(r.*) rather than a bare alias: a column named like the alias
	// would otherwise be hashed instead of the row. textsend gives the
	// row's text in the connection's encoding, UTF8, so that equal rows
	// of databases in different encodings hash equal (a SQL_ASCII
	// database's bytes pass unconverted); encode(..., 'escape') turns
	// those bytes into ASCII text, the same in every server encoding.
	// Each row gets two 64-bit hashes (hashtextextended with two seeds,
	// the function behind hash partitioning, stable across versions),
	// summed exactly (sum of bigint is numeric): independent of row
	// order, duplicates counted, and about a fifth of the server time of
	// sorting one md5 per row, which is on the path of every compare and
	// of follow finish's downtime. Its values are those of one byte
	// order: comparing servers of different endianness reports every
	// non-empty table as different, never the reverse.
	q := `SELECT count(*), coalesce(sum(pg_catalog.hashtextextended(t, 0)), 0)::text || '/' ||
		coalesce(sum(pg_catalog.hashtextextended(t, 1)), 0)::text
		FROM (SELECT pg_catalog.encode(pg_catalog.textsend(ROW(r.*)::text), 'escape') AS t FROM ONLY ` + r.name + ` AS r) s`
	var n int64
	var h string
	if err := conn.QueryRow(ctx, q).Scan(&n, &h); err != nil {
		return "", fmt.Errorf("hashing %s: %w", r.name, err)
	}
	return fmt.Sprintf("rows=%d hash=%s", n, h), nil
}

// largeObjects adds every large object's metadata and content hash.
func largeObjects(ctx context.Context, conn *pgx.Conn, fp map[string]string, mu *sync.Mutex) error {
	los, err := conn.Query(ctx, `
		SELECT m.oid::int8, pg_get_userbyid(m.lomowner)::text, coalesce(m.lomacl::text, ''),
		       coalesce(obj_description(m.oid, 'pg_largeobject'), ''),
		       octet_length(d.d), md5(d.d)
		FROM pg_largeobject_metadata m CROSS JOIN LATERAL lo_get(m.oid) AS d(d)
		ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("listing large objects: %w", err)
	}
	defer los.Close()
	for los.Next() {
		var oid, size int64
		var owner, acl, comment, sum string
		if err := los.Scan(&oid, &owner, &acl, &comment, &size, &sum); err != nil {
			return fmt.Errorf("reading large object: %w", err)
		}
		mu.Lock()
		fp[fmt.Sprintf("large object %d", oid)] = fmt.Sprintf("owner=%q acl=%q comment=%q size=%d md5=%s", owner, acl, comment, size, sum)
		mu.Unlock()
	}
	if err := los.Err(); err != nil {
		return fmt.Errorf("reading large objects: %w", err)
	}
	return nil
}

// Pair is one key of two Fingerprints side by side.
type Pair struct {
	Key      string
	A, B     string
	InA, InB bool
}

// Equal reports whether both sides have the key with the same value.
func (e Pair) Equal() bool { return e.InA && e.InB && e.A == e.B }

// Compare lines up two Fingerprints key by key, sorted by key: the one
// walk behind both FingerprintDiff and the compare command's report.
func Compare(a, b map[string]string) []Pair {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]Pair, len(keys))
	for i, k := range keys {
		e := Pair{Key: k}
		e.A, e.InA = a[k]
		e.B, e.InB = b[k]
		out[i] = e
	}
	return out
}

// FingerprintDiff lists, sorted by key, every key whose value differs between
// two Fingerprints or that only one has; it is empty when they are equal. It
// is exported so tests can assert that a change is detected.
func FingerprintDiff(a, b map[string]string) []string {
	var out []string
	for _, e := range Compare(a, b) {
		switch {
		case !e.InA:
			out = append(out, fmt.Sprintf("%s: only in b (%s)", e.Key, e.B))
		case !e.InB:
			out = append(out, fmt.Sprintf("%s: only in a (%s)", e.Key, e.A))
		case e.A != e.B:
			out = append(out, fmt.Sprintf("%s:\n  a: %s\n  b: %s", e.Key, e.A, e.B))
		}
	}
	return out
}

// SubsetOf is the subset rules recorded in the database cfg names
// (pg.SubsetSetting, left by a restore or clone of a subset archive), or
// "" for a database that is not a development copy.
func SubsetOf(ctx context.Context, cfg *pgx.ConnConfig) (string, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s *string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting($1, true)", pg.SubsetSetting).Scan(&s); err != nil {
		return "", fmt.Errorf("read %s: %w", pg.SubsetSetting, err)
	}
	if s == nil {
		return "", nil
	}
	return *s, nil
}

// MaskedOf is the masked tables recorded in the database cfg names
// (pg.MaskSetting, left by a restore or clone of a masked archive), as
// fingerprint keys (schema.table, quoted as needed), with a one-line
// description and the record itself (for ContentDiff); none for a
// database that is not masked.
func MaskedOf(ctx context.Context, cfg *pgx.ConnConfig) (map[string]bool, string, *archive.Mask, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s *string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting($1, true)", pg.MaskSetting).Scan(&s); err != nil {
		return nil, "", nil, fmt.Errorf("read %s: %w", pg.MaskSetting, err)
	}
	if s == nil || *s == "" {
		return nil, "", nil, nil
	}
	var m archive.Mask
	if err := json.Unmarshal([]byte(*s), &m); err != nil {
		return nil, "", nil, fmt.Errorf("read %s: %w", pg.MaskSetting, err)
	}
	tables := map[string]bool{}
	for _, c := range m.Columns {
		var key string
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.format('%I.%I', $1::text, $2::text)", c.Schema, c.Table).Scan(&key); err != nil {
			return nil, "", nil, fmt.Errorf("read %s: %w", pg.MaskSetting, err)
		}
		tables[key] = true
	}
	return tables, m.Describe(), &m, nil
}

// SameRows says whether fingerprints a and b are of tables with as many
// rows each (whatever their values).
func SameRows(a, b string) bool {
	na, okA := rowsOf(a)
	nb, okB := rowsOf(b)
	return okA && okB && na == nb
}

// rowsOf is the row count of a table's fingerprint ("rows=N hash=H").
func rowsOf(fp string) (int64, bool) {
	var n int64
	var h string
	_, err := fmt.Sscanf(fp, "rows=%d hash=%s", &n, &h)
	return n, err == nil
}

// FewerRows says whether fingerprint a is a table's with fewer rows than
// b's (the values hashRelation gives: "rows=N hash=H").
func FewerRows(a, b string) bool {
	na, okA := rowsOf(a)
	nb, okB := rowsOf(b)
	return okA && okB && na < nb
}
