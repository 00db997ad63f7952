package mask

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// Report is what Check found: rules that cannot run (Errors), columns
// that look sensitive and are left unmasked (Warnings), and what a sample
// row of each masked table becomes.
type Report struct {
	Errors   []string
	Warnings []string
	Samples  []Sample
}

// Sample is one row of a masked table, its masked columns before and
// after.
type Sample struct {
	Table   string // quoted, qualified
	Columns []string
	Before  []string
	After   []string
}

// sensitiveName is a column name that suggests personal data or a
// credential.
var sensitiveName = regexp.MustCompile(`(?i)(mail|phone|mobile|fax|name|address|street|city|zip|postal|token|secret|passw|pwd|iban|ssn|social_sec|birth|dob|credit|card|tax_?id|ip_?addr)`)

// sensitiveValue is a value that looks like personal data: an e-mail
// address, a phone number, an IBAN, a US social security number.
var sensitiveValue = []struct {
	what string
	re   *regexp.Regexp
}{
	{"e-mail addresses", regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$`)},
	// Before phone numbers, whose pattern an SSN matches too.
	{"social security numbers", regexp.MustCompile(`^[0-9]{3}-[0-9]{2}-[0-9]{4}$`)},
	{"phone numbers", regexp.MustCompile(`^\+?[0-9][0-9 ().-]{6,}[0-9]$`)},
	{"IBANs", regexp.MustCompile(`^[A-Z]{2}[0-9]{2} ?[A-Z0-9 ]{10,32}$`)},
	// Inside a longer text or a json value (a note, a payload).
	{"text holding e-mail addresses", regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)},
}

// sampleRows and sampleTables bound the content sample: the first rows of
// each of the first tables, so that a check of a big database stays quick.
const (
	sampleRows   = 20
	sampleTables = 500
)

// Check validates spec against the database conn is connected to, in a
// read-only transaction it begins and ends: the rules' problems (as
// Resolve refuses them), the columns of every table that look sensitive
// by name or by a sample of their values and that no rule names (keep
// silences one), and one row of each masked table, before and after.
func Check(ctx context.Context, conn *pgx.Conn, spec Spec) (*Report, error) {
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return nil, fmt.Errorf("mask check: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	var enc string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_encoding')").Scan(&enc); err != nil {
		return nil, fmt.Errorf("mask check: %w", err)
	}
	rep := &Report{}
	plan, err := Resolve(ctx, conn, spec, enc)
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		rep.Errors = refused.Problems
	case err != nil:
		return nil, err
	}
	named := map[string]bool{}
	for _, r := range spec.Rules {
		named[r.Schema+"\x00"+r.Table+"\x00"+r.Column] = true
	}
	if err := warnUnmasked(ctx, conn, named, rep); err != nil {
		return nil, err
	}
	if plan != nil {
		if enc == "SQL_ASCII" {
			if _, err := conn.Exec(ctx, "SET LOCAL client_encoding TO 'SQL_ASCII'"); err != nil {
				return nil, fmt.Errorf("mask check: %w", err)
			}
		}
		for _, k := range plan.order {
			t := plan.tables[k]
			s, err := sample(ctx, conn, plan, t, enc)
			if err != nil {
				return nil, err
			}
			if s != nil {
				rep.Samples = append(rep.Samples, *s)
			}
		}
	}
	return rep, nil
}

// warnUnmasked adds a warning for each column of a user table (partitions
// are their parent's) that no rule names and that looks sensitive: by its
// name, or by a sample of its values (text and json columns).
func warnUnmasked(ctx context.Context, conn *pgx.Conn, named map[string]bool, rep *Report) error {
	rows, err := conn.Query(ctx, `
		SELECT n.nspname::text, c.relname::text, a.attname::text, b.typcategory = 'S' OR b.typname IN ('json', 'jsonb')
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
		  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
		ORDER BY n.nspname, c.relname, a.attnum`)
	if err != nil {
		return fmt.Errorf("mask check: list columns: %w", err)
	}
	type col struct {
		schema, table, name string
		text                bool
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (col, error) {
		var c col
		return c, r.Scan(&c.schema, &c.table, &c.name, &c.text)
	})
	if err != nil {
		return fmt.Errorf("mask check: list columns: %w", err)
	}
	// Columns to sample by content, by table.
	var order []string
	byTable := map[string][]col{}
	for _, c := range cols {
		if named[c.schema+"\x00"+c.table+"\x00"+c.name] {
			continue
		}
		full := pg.Qualified(c.schema, c.table) + "." + pg.Ident(c.name)
		if sensitiveName.MatchString(c.name) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s is not masked and its name looks sensitive (mask it, or say keep)", full))
			continue
		}
		if c.text {
			k := pg.Qualified(c.schema, c.table)
			if byTable[k] == nil {
				order = append(order, k)
			}
			byTable[k] = append(byTable[k], c)
		}
	}
	for i, k := range order {
		if i == sampleTables {
			break
		}
		cs := byTable[k]
		sel := make([]string, len(cs))
		for j, c := range cs {
			sel[j] = pg.Ident(c.name) + "::text"
		}
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s FROM ONLY %s LIMIT %d", strings.Join(sel, ", "), k, sampleRows))
		if err != nil {
			return fmt.Errorf("mask check: sample %s: %w", k, err)
		}
		hits := make([]string, len(cs))
		for rows.Next() {
			vals := make([]*string, len(cs))
			ptrs := make([]any, len(cs))
			for j := range vals {
				ptrs[j] = &vals[j]
			}
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return fmt.Errorf("mask check: sample %s: %w", k, err)
			}
			for j, v := range vals {
				if v == nil || hits[j] != "" {
					continue
				}
				for _, s := range sensitiveValue {
					if s.re.MatchString(strings.TrimSpace(*v)) {
						hits[j] = s.what
						break
					}
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("mask check: sample %s: %w", k, err)
		}
		for j, h := range hits {
			if h != "" {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s.%s is not masked and its values look like %s (mask it, or say keep)", k, pg.Ident(cs[j].name), h))
			}
		}
	}
	return nil
}

// sample reads one row of t's masked columns as the data path reads them
// (COPY text in the database's encoding) and masks it.
func sample(ctx context.Context, conn *pgx.Conn, plan *Resolved, t *planTable, enc string) (*Sample, error) {
	name := pg.Qualified(t.schema, t.name)
	q := pg.Copy{Query: fmt.Sprintf("SELECT %s FROM ONLY %s LIMIT 1", pg.ColumnList(t.names), name), Encoding: enc}
	var raw bytes.Buffer
	if _, err := conn.PgConn().CopyTo(ctx, &raw, q.To()); err != nil {
		return nil, fmt.Errorf("mask check: sample %s: %w", name, err)
	}
	if raw.Len() == 0 {
		return nil, nil
	}
	var masked bytes.Buffer
	w := plan.Table(t.schema, t.name, t.names).Writer(&masked)
	if _, err := w.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &Sample{Table: name, Columns: t.names, Before: fields(raw.Bytes()), After: fields(masked.Bytes())}, nil
}

// fields splits one COPY text row into its values, unescaped, NULL as
// "NULL".
func fields(row []byte) []string {
	var out []string
	for _, f := range bytes.Split(bytes.TrimSuffix(row, []byte("\n")), []byte("\t")) {
		if string(f) == `\N` {
			out = append(out, "NULL")
			continue
		}
		out = append(out, string(unescape(nil, f)))
	}
	return out
}
