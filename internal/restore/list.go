package restore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/listfile"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/tempfile"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// The entries restore -l adds to pg_dump's schema-only table of contents
// for the data pgsprint carries itself.
const (
	tableData   = "TABLE DATA"
	sequenceSet = "SEQUENCE SET"
	matviewData = "MATERIALIZED VIEW DATA"
	blobs       = "BLOBS"
)

// contents is an archive's table of contents as restore -l prints it and
// restore -L reads it: the embedded pg_dump schema archive's entries (as
// pg_restore --list prints them, with their dump IDs) and one entry per
// table's data, sequence value and materialized view refresh, and one for
// all large objects. pg_dump's schema-only archive has none of these, so
// they get the dump IDs after the schema's highest, in that order (tables
// and sequences in the manifest's order): the same archive always lists
// the same IDs.
type contents struct {
	header []string // pg_restore's comment lines about the archive
	lines  []string // every entry line, in the order printed
	schema map[int]toc.ListEntry
	order  []int // schema entry IDs in the archive's order
	maxID  int   // the schema's highest dump ID
	data   map[int]dataEntry
}

// dataEntry is one of pgsprint's entries: what it loads.
type dataEntry struct {
	kind string // tableData, sequenceSet, matviewData or blobs
	rel  filter.Rel
}

// readContents builds the table of contents of the archive whose schema
// archive is schema and whose whole manifest is m.
func readContents(ctx context.Context, schema *schemaArchive, m *archive.Manifest) (*contents, error) {
	listing, err := schema.list(ctx)
	if err != nil {
		return nil, err
	}
	header, entries, err := toc.ParseList(string(listing))
	if err != nil {
		return nil, err
	}
	pre, err := schema.list(ctx, "--section=pre-data")
	if err != nil {
		return nil, err
	}
	preIDs, err := toc.ListIDs(string(pre))
	if err != nil {
		return nil, err
	}
	c := &contents{header: header, schema: map[int]toc.ListEntry{}, data: map[int]dataEntry{}}
	isPre := map[int]bool{}
	for _, id := range preIDs {
		isPre[id] = true
	}
	at := 0 // the data goes after the last pre-data entry, as in pg_dump's archives
	byOID := map[uint32]toc.ListEntry{}
	for i, e := range entries {
		c.schema[e.ID] = e
		c.order = append(c.order, e.ID)
		c.maxID = max(c.maxID, e.ID)
		if isPre[e.ID] {
			at = i + 1
		}
		if e.Class == relationClass {
			byOID[e.OID] = e
		}
	}
	oids := map[filter.Rel]uint32{}
	for _, o := range m.Relations {
		oids[filter.Rel{Schema: o.Schema, Name: o.Name}] = o.OID
	}
	next := c.maxID
	// line is an entry of ours for the relation schema.name, which the
	// schema lists as kind (e.g. "TABLE public t owner"): the same
	// namespace, tag and owner, as pg_dump prints its data entries.
	line := func(kind, objKind, schema, name string) string {
		next++
		rel := filter.Rel{Schema: schema, Name: name}
		c.data[next] = dataEntry{kind: kind, rel: rel}
		oid := oids[rel]
		if e, ok := byOID[oid]; ok && oid != 0 && strings.HasPrefix(e.Desc, objKind+" ") {
			return fmt.Sprintf("%d; 0 %d %s %s", next, oid, kind, strings.TrimPrefix(e.Desc, objKind+" "))
		}
		return fmt.Sprintf("%d; 0 %d %s %s %s -", next, oid, kind, listName(schema), listName(name))
	}
	var data, post []string
	for _, t := range m.Tables {
		data = append(data, line(tableData, "TABLE", t.Schema, t.Name))
	}
	for _, s := range m.Sequences {
		data = append(data, line(sequenceSet, "SEQUENCE", s.Schema, s.Name))
	}
	for _, mv := range m.Matviews {
		post = append(post, line(matviewData, "MATERIALIZED VIEW", mv.Schema, mv.Name))
	}
	if len(m.LargeObjects) > 0 {
		next++
		c.data[next] = dataEntry{kind: blobs}
		data = append(data, fmt.Sprintf("%d; 0 0 %s - %s", next, blobs, blobs))
	}
	for i, e := range entries {
		if i == at {
			c.lines = append(c.lines, data...)
		}
		c.lines = append(c.lines, e.Line)
	}
	if at == len(entries) {
		c.lines = append(c.lines, data...)
	}
	c.lines = append(c.lines, post...)
	return c, nil
}

// listName is a name as pg_restore prints it in a listing: on one line.
func listName(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// write prints the table of contents in pg_restore --list's format.
func (c *contents) write(w io.Writer) error {
	var b strings.Builder
	for _, h := range c.header {
		if strings.TrimSpace(h) == "; Selected TOC Entries:" && len(c.data) > 0 {
			fmt.Fprintf(&b, "; pgsprint: entries %d and above are pgsprint's own data (%s, %s, %s, %s):\n", c.maxID+1, tableData, sequenceSet, matviewData, blobs)
			b.WriteString(";     a list without any of them (commented out or not) loads the data\n")
			b.WriteString(";     of every table, sequence and materialized view whose entry it keeps,\n")
			b.WriteString(";     and the large objects\n;\n")
		}
		b.WriteString(h + "\n")
	}
	for _, l := range c.lines {
		b.WriteString(l + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// List writes the table of contents of the archive ar in pg_restore
// --list's format: what restore -L reads back. It needs pg_restore but
// no database.
func List(ctx context.Context, ar archive.Source, w io.Writer, log *slog.Logger) error {
	schema, cleanup, err := offlineSchema(ctx, ar, Options{})
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := readContents(ctx, schema, ar.Manifest())
	if err != nil {
		return err
	}
	return c.write(w)
}

// chooseFromList applies restore -L: the entries the user's list keeps,
// by dump ID, as pg_restore -L does. Schema entries are restored with
// pg_restore --use-list (in the archive's order: pgsprint schedules the
// work itself, so the order of the lines does not matter); pgsprint's
// data entries pick which tables are loaded, sequences set, materialized
// views refreshed and whether the large objects come. A list without any
// data entry, commented out or not (one edited from pg_restore -l of the
// embedded schema), loads the data of every table, sequence and
// materialized view whose own entry it keeps, and the large objects.
// It narrows ch.m as chooseParts does and returns the whole manifest.
func (ch *chooser) chooseFromList(ctx context.Context) (*archive.Manifest, error) {
	f, err := listfile.Open("-L", ch.opts.UseList)
	if err != nil {
		return nil, err
	}
	text, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("-L %s: %w", ch.opts.UseList, err)
	}
	lines, err := toc.ParseUseList(string(text))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ch.opts.UseList, err)
	}
	c, err := readContents(ctx, ch.schema, ch.m)
	if err != nil {
		return nil, err
	}
	kept := map[int]bool{}
	hasData := false
	for _, l := range lines {
		_, schema := c.schema[l.ID]
		_, data := c.data[l.ID]
		if !schema && !data {
			return nil, fmt.Errorf("list %s line %d: the archive has no entry %d (list it with restore -l)", ch.opts.UseList, l.Number, l.ID)
		}
		hasData = hasData || data
		if !l.Commented {
			kept[l.ID] = true
		}
	}
	byOID := map[uint32]archive.Object{}
	for _, o := range ch.m.Relations {
		byOID[o.OID] = o
	}
	if !hasData && len(ch.m.Relations) == 0 && len(ch.m.Tables) > 0 {
		return nil, fmt.Errorf("list %s: the archive was written by a pgsprint without an object list, so its schema entries cannot be matched to tables: keep or comment out its %s lines (restore -l), or dump it again", ch.opts.UseList, tableData)
	}
	matched := &filter.Matched{Relations: map[filter.Rel]bool{}}
	if hasData {
		for id, d := range c.data {
			switch {
			case !kept[id]:
			case d.kind == blobs:
				matched.LargeObjects = true
			default:
				matched.Relations[d.rel] = true
			}
		}
	} else {
		matched.LargeObjects = true
		for id := range kept {
			if e, ok := c.schema[id]; ok && e.Class == relationClass {
				if o, ok := byOID[e.OID]; ok {
					matched.Relations[filter.Rel{Schema: o.Schema, Name: o.Name}] = true
				}
			}
		}
	}
	full := *ch.m
	ch.m = narrow(&full, matched, ch.sel.schemaOnly || ch.sel.statsOnly, false)
	ch.m.DataOnly = ch.sel.dataOnly
	if ch.sel.dataOnly {
		return &full, nil
	}
	chosen := map[int]bool{}
	var b strings.Builder
	for _, id := range c.order {
		if kept[id] {
			chosen[id] = true
			b.WriteString(strconv.Itoa(id) + ";\n")
		}
	}
	schemas := map[uint32]string{}
	for _, sc := range ch.m.Schemas {
		schemas[sc.OID] = sc.Name
	}
	for _, id := range c.order {
		e := c.schema[id]
		if !kept[id] || e.OID == 0 {
			continue
		}
		switch {
		case e.Class == relationClass:
			if o, ok := byOID[e.OID]; ok {
				ch.sel.relations = append(ch.sel.relations, pg.Qualified(o.Schema, o.Name))
			}
		case e.Class == schemaClass && strings.HasPrefix(e.Desc, "SCHEMA "):
			if n, ok := schemas[e.OID]; ok && n != "public" {
				ch.sel.schemas = append(ch.sel.schemas, n)
			}
		}
	}
	file, err := tempfile.Create("", tempfile.Selection)
	if err != nil {
		return nil, fmt.Errorf("write pg_restore list: %w", err)
	}
	defer file.Close()
	if _, err := file.WriteString(b.String()); err != nil {
		os.Remove(file.Name())
		return nil, fmt.Errorf("write pg_restore list: %w", err)
	}
	ch.sel.list, ch.sel.ids = file.Name(), chosen
	return &full, nil
}
