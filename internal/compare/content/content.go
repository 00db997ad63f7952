// Package content compares a development copy's rows with its source's
// where counts and hashes cannot (compare on subset and masked copies):
// row by row, by key, masked columns left out or recomputed through
// internal/mask. It is apart from compare, which internal/pgtest imports,
// so that internal/mask's tests may use pgtest.
package content

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Options say how a development copy was made from its whole, so
// that Diff knows which differences are by design.
type Options struct {
	// Subset: the copy may lack rows of the whole (never hold others).
	Subset bool
	// Mask is the copy's masked columns as recorded in it
	// (pg.MaskSetting), nil when it is not masked.
	Mask *archive.Mask
	// Secret is the mask secret: with it the masked columns are
	// recomputed from the whole through internal/mask and compared too;
	// without it they are left out of the comparison.
	Secret []byte
}

// Mismatch is a table whose rows in the copy are not what the whole's
// rows make them: First describes the first row found, by key.
type Mismatch struct {
	Table string // quoted, qualified (a fingerprint key)
	Rows  int64  // rows found different
	First string
}

// maxKeyText is how much of a key is printed in a Mismatch.
const maxKeyText = 120

// Diff compares, row by row, the tables (fingerprint keys: quoted
// schema.name of plain tables) of copy with those of whole, where counts
// and hashes cannot tell a development copy's design from tampering:
// every row of the copy must equal the whole's row of the same primary
// key (or, without one, be one of the whole's rows, as many times at
// most), masked columns left out or, with the secret, recomputed; rows of
// the whole missing from the copy are a difference unless o.Subset. Both
// sides are read as COPY text ordered by key and merged while they
// stream: memory does not grow with the tables. It returns the tables
// that differ, in the order given.
func Diff(ctx context.Context, whole, copy *pgx.ConnConfig, tables []string, o Options) ([]Mismatch, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	// Values are read as dump reads them (pg.Connect's settings, the
	// whole's time zone), so that a masked value is recomputed from the
	// very text dump masked; the copy is read in the same time zone.
	wc, err := contentConn(ctx, whole, "")
	if err != nil {
		return nil, err
	}
	defer wc.Close(context.WithoutCancel(ctx))
	var tz string
	if err := wc.QueryRow(ctx, "SELECT pg_catalog.current_setting('TimeZone')").Scan(&tz); err != nil {
		return nil, fmt.Errorf("read TimeZone: %w", err)
	}
	cc, err := contentConn(ctx, copy, tz)
	if err != nil {
		return nil, err
	}
	defer cc.Close(context.WithoutCancel(ctx))
	masked := map[string]map[string]bool{} // schema\x00table -> masked columns
	if o.Mask != nil {
		for _, c := range o.Mask.Columns {
			k := c.Schema + "\x00" + c.Table
			if masked[k] == nil {
				masked[k] = map[string]bool{}
			}
			masked[k][c.Column] = true
		}
	}
	var plan *mask.Resolved
	if o.Mask != nil && len(o.Secret) > 0 {
		if plan, err = resolveRecorded(ctx, wc, o.Mask, o.Secret); err != nil {
			return nil, err
		}
	}
	var out []Mismatch
	for _, t := range tables {
		tb, err := readTable(ctx, wc, t)
		if err != nil {
			return nil, err
		}
		if tb == nil {
			continue // not a plain table: nothing to compare row by row
		}
		tb.plan(masked[tb.schema+"\x00"+tb.name], plan != nil)
		var mt *mask.TableMask
		if plan != nil {
			mt = plan.Table(tb.schema, tb.name, append([]string{""}, tb.cols...))
		}
		m, err := diffTable(ctx, wc, cc, tb, mt, o.Subset)
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, *m)
		}
	}
	return out, nil
}

// contentConn opens a read-only repeatable-read transaction on cfg's
// database with pg.Connect's settings, in time zone tz unless it is "".
func contentConn(ctx context.Context, cfg *pgx.ConnConfig, tz string) (*pgx.Conn, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	stmts := []string{"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "SET LOCAL search_path = pg_catalog", "SET LOCAL row_security = off"}
	if tz != "" {
		stmts = append(stmts, "SET LOCAL TimeZone = "+pg.Literal(tz))
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return conn, nil
}

// resolveRecorded is the plan of the rules recorded in a masked copy,
// resolved against the whole's schema with secret, as dump resolved them.
func resolveRecorded(ctx context.Context, conn *pgx.Conn, m *archive.Mask, secret []byte) (*mask.Resolved, error) {
	spec := mask.Spec{Secret: secret}
	for _, c := range m.Columns {
		r, err := mask.ParseRule(c.Rule)
		if err != nil {
			return nil, fmt.Errorf("the copy's recorded mask rule %s: %w", pg.Qualified(c.Schema, c.Table)+"."+pg.Ident(c.Column), err)
		}
		r.Schema, r.Table, r.Column = c.Schema, c.Table, c.Column
		spec.Rules = append(spec.Rules, r)
	}
	var encoding string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('server_encoding')").Scan(&encoding); err != nil {
		return nil, fmt.Errorf("read server_encoding: %w", err)
	}
	return mask.Resolve(ctx, conn, spec, encoding)
}

// table is what diffTable reads of one table.
type table struct {
	key          string // quoted, qualified
	schema, name string
	cols         []string // read: every column dump reads, in order
	pk           []string // the primary key's columns, nil when none
	// Filled by plan:
	keyed   bool     // rows matched by pk
	order   []string // the columns the rows are ordered and matched by
	compare []string // the columns compared (cols less masked, unless recomputed)
}

// readTable reads t's columns and primary key from conn's catalog, or
// nil when t is not a plain table.
func readTable(ctx context.Context, conn *pgx.Conn, t string) (*table, error) {
	tb := &table{key: t}
	var kind string
	err := conn.QueryRow(ctx, `
		SELECT n.nspname, c.relname, c.relkind::text,
		       ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute a
		             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		               AND coalesce(pg_catalog.to_jsonb(a)->>'attgenerated', '') = ''
		             ORDER BY a.attnum),
		       ARRAY(SELECT a.attname::text FROM pg_catalog.pg_index i
		             CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)
		             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.n
		             WHERE i.indrelid = c.oid AND i.indisprimary ORDER BY k.o)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = pg_catalog.to_regclass($1)`, t).Scan(&tb.schema, &tb.name, &kind, &tb.cols, &tb.pk)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("compare rows of %s: %w", t, err)
	}
	if kind != "r" {
		return nil, nil
	}
	return tb, nil
}

// plan chooses how rows are matched and which columns are compared: by
// primary key unless a key column is masked (its values differ by
// design), else by the whole row of the columns compared; masked columns
// are compared only when recomputed, and only when rows are matched by
// key (without one, the masked values could not be ordered alike).
func (tb *table) plan(masked map[string]bool, recompute bool) {
	tb.keyed = len(tb.pk) > 0
	for _, c := range tb.pk {
		if masked[c] {
			tb.keyed = false
		}
	}
	tb.compare = nil
	for _, c := range tb.cols {
		if !masked[c] || (recompute && tb.keyed) {
			tb.compare = append(tb.compare, c)
		}
	}
	if tb.keyed {
		tb.order = tb.pk
	} else {
		tb.order = nil
		for _, c := range tb.cols {
			if !masked[c] {
				tb.order = append(tb.order, c)
			}
		}
	}
}

// query is the COPY that reads tb's rows on one side: the ordering key
// (the UTF8 bytes of its columns' row text, in hex, so that Go orders
// the lines as the server does whatever the collation), then the columns
// compared; with cols every column read (for a mask.Table fed the line).
func (tb *table) query(all bool) string {
	quote := func(cs []string) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = "r." + pg.Ident(c)
		}
		return out
	}
	k := "pg_catalog.convert_to(ROW(" + strings.Join(quote(tb.order), ", ") + ")::text, 'UTF8')"
	sel := []string{"pg_catalog.encode(" + k + ", 'hex')"}
	if all {
		sel = append(sel, quote(tb.cols)...)
	} else {
		sel = append(sel, quote(tb.compare)...)
	}
	return "COPY (SELECT " + strings.Join(sel, ", ") + " FROM ONLY " + tb.key + " AS r ORDER BY " + k + ") TO STDOUT"
}

// diffTable merges both sides' ordered rows.
func diffTable(ctx context.Context, wc, cc *pgx.Conn, tb *table, mt *mask.TableMask, subset bool) (*Mismatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The whole is read with every column when a mask.Table rewrites
	// its lines, then cut to the columns compared.
	w, werr := stream(ctx, wc, tb.query(mt != nil), mt)
	c, cerr := stream(ctx, cc, tb.query(false), nil)
	drain := func() error {
		cancel()
		w.Close()
		c.Close()
		e1, e2 := <-werr, <-cerr
		return errors.Join(e1, e2)
	}
	keep := keepFields(tb, mt != nil)
	m := &Mismatch{Table: tb.key}
	note := func(s string) {
		if m.Rows++; m.First == "" {
			m.First = s
		}
	}
	fail := func(err error) (*Mismatch, error) {
		if d := drain(); d != nil {
			return nil, d
		}
		return nil, err
	}
	wl, wok, err := next(w, keep)
	if err != nil {
		return fail(err)
	}
	cl, cok, err := next(c, nil)
	if err != nil {
		return fail(err)
	}
	for wok || cok {
		var wk, ck []byte
		if wok {
			wk, _, _ = bytes.Cut(wl, []byte{'\t'})
		}
		if cok {
			ck, _, _ = bytes.Cut(cl, []byte{'\t'})
		}
		cmp := 0
		switch {
		case !wok:
			cmp = 1
		case !cok:
			cmp = -1
		default:
			cmp = bytes.Compare(wk, ck)
		}
		switch {
		case cmp < 0:
			if !subset {
				note(tb.describe(wk) + " is missing from the copy")
			}
			if wl, wok, err = next(w, keep); err != nil {
				return fail(err)
			}
			continue
		case cmp > 0:
			note(tb.describe(ck) + " is only in the copy")
			if cl, cok, err = next(c, nil); err != nil {
				return fail(err)
			}
			continue
		}
		if !bytes.Equal(wl, cl) {
			note(tb.describe(wk) + ": " + tb.columnsDiffer(wl, cl) + " differ")
		}
		if wl, wok, err = next(w, keep); err != nil {
			return fail(err)
		}
		if cl, cok, err = next(c, nil); err != nil {
			return fail(err)
		}
	}
	if err := drain(); err != nil {
		return nil, err
	}
	if m.Rows == 0 {
		return nil, nil
	}
	return m, nil
}

// keepFields is, when the whole is read with every column, which fields
// of its lines to keep (the key, then the columns compared); nil keeps all.
func keepFields(tb *table, all bool) []bool {
	if !all {
		return nil
	}
	compared := map[string]bool{}
	for _, c := range tb.compare {
		compared[c] = true
	}
	keep := []bool{true}
	for _, c := range tb.cols {
		keep = append(keep, compared[c])
	}
	return keep
}

// describe names a row by its key: the primary key's columns and values,
// or the row's compared columns.
func (tb *table) describe(hexKey []byte) string {
	b := make([]byte, hex.DecodedLen(len(hexKey)))
	n, err := hex.Decode(b, hexKey)
	text := string(b[:n])
	if err != nil {
		text = "?"
	}
	if len(text) > maxKeyText {
		text = text[:maxKeyText] + "…"
	}
	names := make([]string, len(tb.order))
	for i, c := range tb.order {
		names[i] = pg.Ident(c)
	}
	if tb.keyed {
		return "row (" + strings.Join(names, ", ") + ")=" + text
	}
	return "row " + text + " of (" + strings.Join(names, ", ") + ")"
}

// columnsDiffer names the compared columns whose fields differ between
// two lines of the same key (never their values: a masked column's must
// not be printed).
func (tb *table) columnsDiffer(a, b []byte) string {
	fa, fb := bytes.Split(a, []byte{'\t'}), bytes.Split(b, []byte{'\t'})
	var names []string
	for i, c := range tb.compare {
		if i+1 >= len(fa) || i+1 >= len(fb) || !bytes.Equal(fa[i+1], fb[i+1]) {
			names = append(names, pg.Ident(c))
		}
	}
	if len(names) == 0 {
		return "the rows"
	}
	return "columns " + strings.Join(names, ", ")
}

// stream runs copyTo on conn into a pipe, through mt's masking when mt is
// not nil, and returns the pipe's reading end and the COPY's result.
func stream(ctx context.Context, conn *pgx.Conn, copyTo string, mt *mask.TableMask) (*lineReader, <-chan error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var w io.Writer = pw
		var mw *mask.Writer
		if mt != nil {
			mw = mt.Writer(pw)
			w = mw
		}
		_, err := conn.PgConn().CopyTo(ctx, w, copyTo)
		if err == nil && mw != nil {
			err = mw.Close()
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", copyTo, err)
		}
		pw.CloseWithError(err)
		if errors.Is(err, io.ErrClosedPipe) || ctx.Err() != nil {
			err = nil // the reader stopped first
		}
		done <- err
	}()
	return &lineReader{r: bufio.NewReaderSize(pr, 64<<10), pr: pr}, done
}

// lineReader reads a COPY's lines.
type lineReader struct {
	r    *bufio.Reader
	pr   *io.PipeReader
	line []byte
}

// Close stops the reading, unblocking the COPY's writer.
func (l *lineReader) Close() { l.pr.Close() }

// next is the next line of l without its newline, keeping only the
// fields keep says (all when keep is nil); false at the end.
func next(l *lineReader, keep []bool) ([]byte, bool, error) {
	l.line = l.line[:0]
	for {
		part, err := l.r.ReadSlice('\n')
		l.line = append(l.line, part...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if len(l.line) > 0 {
				return nil, false, fmt.Errorf("compare rows: a COPY line was cut short")
			}
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		break
	}
	line := l.line[:len(l.line)-1]
	if keep == nil {
		return line, true, nil
	}
	out := line[:0:0]
	for i, f := range bytes.Split(line, []byte{'\t'}) {
		if i < len(keep) && keep[i] {
			if len(out) > 0 {
				out = append(out, '\t')
			}
			out = append(out, f...)
		}
	}
	return out, true, nil
}
