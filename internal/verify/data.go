// Package verify compares two databases the way a DBA would trust: the
// schema as pg_dump prints it, and every table's rows by count and an
// order-independent content hash, with sequences and large objects.
package verify

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
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
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.Background()) //nolint:errcheck // read-only; nothing to lose

	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("beginning snapshot: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only
	for _, s := range fingerprintSettings() {
		if _, err := tx.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}

	type rel struct {
		name      string
		kind      string
		populated bool
	}
	rows, err := tx.Query(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text, c.relispopulated
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'm', 'S')
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("listing relations: %w", err)
	}
	rels, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rel, error) {
		var x rel
		err := r.Scan(&x.name, &x.kind, &x.populated)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing relations: %w", err)
	}

	fp := make(map[string]string, len(rels))
	for _, r := range rels {
		switch {
		case r.kind == "S":
			var last int64
			var called bool
			if err := tx.QueryRow(ctx, "SELECT last_value, is_called FROM "+r.name).Scan(&last, &called); err != nil {
				return nil, fmt.Errorf("reading sequence %s: %w", r.name, err)
			}
			fp[r.name] = fmt.Sprintf("last_value=%d is_called=%t", last, called)
		case !r.populated:
			fp[r.name] = "not populated"
		default:
			// ROW(r.*) rather than a bare alias: a column named like the
			// alias would otherwise be hashed instead of the row.
			q := `SELECT count(*), coalesce(md5(string_agg(h, '' ORDER BY h COLLATE "C")), '')
				FROM (SELECT md5(ROW(r.*)::text) AS h FROM ONLY ` + r.name + ` AS r) s`
			var n int64
			var h string
			if err := tx.QueryRow(ctx, q).Scan(&n, &h); err != nil {
				return nil, fmt.Errorf("hashing %s: %w", r.name, err)
			}
			fp[r.name] = fmt.Sprintf("rows=%d md5=%s", n, h)
		}
	}

	los, err := tx.Query(ctx, `
		SELECT m.oid::int8, pg_get_userbyid(m.lomowner)::text, coalesce(m.lomacl::text, ''),
		       coalesce(obj_description(m.oid, 'pg_largeobject'), ''),
		       octet_length(d.d), md5(d.d)
		FROM pg_largeobject_metadata m CROSS JOIN LATERAL lo_get(m.oid) AS d(d)
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("listing large objects: %w", err)
	}
	for los.Next() {
		var oid, size int64
		var owner, acl, comment, sum string
		if err := los.Scan(&oid, &owner, &acl, &comment, &size, &sum); err != nil {
			los.Close()
			return nil, fmt.Errorf("reading large object: %w", err)
		}
		fp[fmt.Sprintf("large object %d", oid)] = fmt.Sprintf("owner=%q acl=%q comment=%q size=%d md5=%s", owner, acl, comment, size, sum)
	}
	if err := los.Err(); err != nil {
		return nil, fmt.Errorf("reading large objects: %w", err)
	}
	return fp, nil
}

// FingerprintDiff lists, sorted by key, every key whose value differs between
// two Fingerprints or that only one has; it is empty when they are equal. It
// is exported so tests can assert that a change is detected.
func FingerprintDiff(a, b map[string]string) []string {
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
	var out []string
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		switch {
		case !oka:
			out = append(out, fmt.Sprintf("%s: only in b (%s)", k, vb))
		case !okb:
			out = append(out, fmt.Sprintf("%s: only in a (%s)", k, va))
		case va != vb:
			out = append(out, fmt.Sprintf("%s:\n  a: %s\n  b: %s", k, va, vb))
		}
	}
	return out
}
