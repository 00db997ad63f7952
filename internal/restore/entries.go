package restore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/tempfile"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// pg_class's and pg_namespace's OIDs: the catalogs of relation and schema
// entries in pg_dump's table of contents.
const (
	relationClass = 1259
	schemaClass   = 2615
)

// chooseEntries picks the schema entries of the selected schemas and
// relations, with what belongs to them (toc.Select), and writes them as a
// pg_restore list. Entries are matched by the OIDs the manifest records,
// never by the display names pg_restore prints.
func (ch *chooser) chooseEntries(ctx context.Context, m *archive.Manifest, matched *filter.Matched) error {
	listing, err := ch.schema.pgRestoreCmd(ctx, "--list", ch.schema.file).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	order, err := toc.ListIDs(string(listing))
	if err != nil {
		return err
	}
	script, err := ch.schema.pgRestoreCmd(ctx, "--verbose", "--file=-", ch.schema.file).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	parsed, err := toc.ParseWhole(string(script), order)
	if err != nil {
		return err
	}
	selected, excluded := map[uint32]bool{}, map[uint32]bool{}
	for _, o := range m.Relations {
		if matched.Relations[filter.Rel{Schema: o.Schema, Name: o.Name}] {
			selected[o.OID] = true
		} else if o.Kind != "S" {
			// A sequence no pattern names still comes with the table
			// that owns it (serial and identity columns), as in pg_dump.
			excluded[o.OID] = true
		}
	}
	include, exclude := map[int]bool{}, map[int]bool{}
	schemaOIDs, dropSchemas := map[uint32]bool{}, map[uint32]bool{}
	var in, out []string
	for _, sc := range m.Schemas {
		if matched.Schemas[sc.Name] {
			schemaOIDs[sc.OID] = true
			in = append(in, sc.Name)
		} else {
			dropSchemas[sc.OID] = true
			out = append(out, sc.Name)
		}
	}
	onlyExclusions := len(ch.opts.Filter.Tables) == 0 && len(ch.opts.Filter.Schemas) == 0
	if onlyExclusions {
		// -N/-T/--exclude-table-data only: everything else comes, the
		// objects that live in no schema (extensions, casts, publications,
		// event triggers...) included, as in pg_dump.
		for _, id := range order {
			include[id] = true
		}
		if err := ch.addMembers(ctx, exclude, out); err != nil {
			return err
		}
	} else {
		missing, err := ch.missingSchemas(ctx, m, matched)
		if err != nil {
			return err
		}
		for _, sc := range m.Schemas {
			if missing[sc.Name] {
				schemaOIDs[sc.OID] = true // the schema itself, not its members
			}
		}
		if err := ch.addMembers(ctx, include, in); err != nil {
			return err
		}
	}
	for _, e := range parsed.Entries {
		switch {
		case e.Type == "DATABASE" || e.Type == "DATABASE PROPERTIES":
			include[e.ID] = true // for --create
		case e.Class == relationClass && selected[e.OID], e.Class == schemaClass && schemaOIDs[e.OID]:
			include[e.ID] = true
		case e.Class == relationClass && excluded[e.OID], onlyExclusions && e.Class == schemaClass && dropSchemas[e.OID]:
			exclude[e.ID] = true
		}
	}
	present, err := ch.presentRelations(ctx, m, parsed.Entries, selected)
	if err != nil {
		return err
	}
	chosen, dropped := toc.Select(parsed.Entries, include, exclude, present)
	var partitions []string
	for _, e := range dropped {
		switch {
		case e.Type == "TABLE ATTACH":
			partitions = append(partitions, e.Name)
			continue
		case e.Type == "INDEX ATTACH": // follows from a partition left out
			continue
		}
		// Worth a word only when it belongs to a restored table: the
		// foreign keys of tables left out are left out anyway.
		if s, n, ok := toc.AlteredTable(e.SQL); ok && !matched.Relations[filter.Rel{Schema: s, Name: n}] {
			continue
		}
		ch.log.Warn("not restored: it joins a restored relation to one that is neither restored nor in the target", "type", e.Type, "name", e.Name)
	}
	if len(partitions) > 0 {
		ch.log.Warn("partitions of a restored partitioned table are not restored: -t selects a table alone, as pg_dump -t does; select them too (e.g. -t 'name*')",
			"partitions", strings.Join(partitions, ", "))
	}
	// The sequences and materialized views restored are those whose
	// entries were chosen: owned sequences come with their tables.
	byOID, schemaIDs := map[uint32]int{}, map[uint32]int{}
	for _, e := range parsed.Entries {
		switch {
		case e.Class == relationClass:
			byOID[e.OID] = e.ID
		case e.Class == schemaClass && e.Type == "SCHEMA":
			schemaIDs[e.OID] = e.ID
		}
	}
	restored := map[filter.Rel]bool{}
	for _, o := range m.Relations {
		if id, ok := byOID[o.OID]; ok && chosen[id] {
			restored[filter.Rel{Schema: o.Schema, Name: o.Name}] = true
			ch.sel.relations = append(ch.sel.relations, pg.Qualified(o.Schema, o.Name))
		}
	}
	// Schemas created, but public, which pg_dump never creates.
	for _, sc := range m.Schemas {
		if id, ok := schemaIDs[sc.OID]; ok && chosen[id] && sc.Name != "public" {
			ch.sel.schemas = append(ch.sel.schemas, sc.Name)
		}
	}
	ch.m.Sequences, ch.m.Matviews = nil, nil
	if !ch.sel.schemaOnly {
		for _, sq := range m.Sequences {
			if restored[filter.Rel{Schema: sq.Schema, Name: sq.Name}] {
				ch.m.Sequences = append(ch.m.Sequences, sq)
			}
		}
		for _, mv := range m.Matviews {
			if restored[filter.Rel{Schema: mv.Schema, Name: mv.Name}] {
				ch.m.Matviews = append(ch.m.Matviews, mv)
			}
		}
	}
	var b strings.Builder
	for _, id := range order {
		if chosen[id] {
			b.WriteString(strconv.Itoa(id) + ";\n")
		}
	}
	file, err := tempfile.Create("", tempfile.Selection)
	if err != nil {
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	defer file.Close()
	if _, err := file.WriteString(b.String()); err != nil {
		os.Remove(file.Name())
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	ch.sel.list, ch.sel.ids = file.Name(), chosen
	return nil
}

// addMembers adds to set the dump IDs of the entries in the named
// schemas: pg_restore --list --schema compares exact names and lists a
// schema's functions, types, tables, views... (not the schema itself).
func (ch *chooser) addMembers(ctx context.Context, set map[int]bool, schemas []string) error {
	if len(schemas) == 0 {
		return nil
	}
	args := []string{"--list"}
	for _, sc := range schemas {
		args = append(args, "--schema="+sc)
	}
	members, err := ch.schema.pgRestoreCmd(ctx, append(args, ch.schema.file)...).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --list --schema: %w", pg.ToolFailure(err))
	}
	ids, err := toc.ListIDs(string(members))
	if err != nil {
		return err
	}
	for _, id := range ids {
		set[id] = true
	}
	return nil
}

// presentRelations returns the relation entries not restored whose
// relations the target already has (none for --create), so that a foreign
// key from a restored table to one of them is restored too.
func (ch *chooser) presentRelations(ctx context.Context, m *archive.Manifest, entries []toc.Entry, selected map[uint32]bool) (map[int]bool, error) {
	present := map[int]bool{}
	if ch.opts.Create || ch.target == nil {
		return present, nil
	}
	var names []string
	oidOf := map[string]uint32{}
	for _, o := range m.Relations {
		if !selected[o.OID] {
			q := pg.Qualified(o.Schema, o.Name)
			names = append(names, q)
			oidOf[q] = o.OID
		}
	}
	if len(names) == 0 {
		return present, nil
	}
	conn, err := pg.Connect(ctx, ch.target)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	found, err := existing(ctx, conn, names)
	if err != nil {
		return nil, err
	}
	there := map[uint32]bool{}
	for _, n := range found {
		there[oidOf[n]] = true
	}
	for _, e := range entries {
		if e.Class == relationClass && there[e.OID] {
			present[e.ID] = true
		}
	}
	return present, nil
}

// missingSchemas returns the schemas of the selected relations that the
// target lacks: -t app.orders into an empty database creates schema app
// too (pg_dump -t would leave it out and the restore would fail).
func (ch *chooser) missingSchemas(ctx context.Context, m *archive.Manifest, matched *filter.Matched) (map[string]bool, error) {
	need := map[string]bool{}
	for rel := range matched.Relations {
		if !matched.Schemas[rel.Schema] {
			need[rel.Schema] = true
		}
	}
	if len(need) == 0 || ch.opts.Create || ch.target == nil { // a created database has only public
		if ch.opts.Create {
			delete(need, "public")
		}
		return need, nil
	}
	conn, err := pg.Connect(ctx, ch.target)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for s := range need {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", s).Scan(&exists); err != nil {
			return nil, fmt.Errorf("inspect target: %w", err)
		}
		if exists {
			delete(need, s)
		}
	}
	return need, nil
}

// refuseExisting stops a partial restore whose relations or schemas exist
// in the target, before anything is created: the target may hold other
// objects, but creating these would fail part-way through pre-data (use
// --clean to replace them), and a resume must be able to tell that every
// selected object in the target is its own.
func (s *selection) refuseExisting(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	found, err := existing(ctx, conn, s.relations)
	if err != nil {
		return err
	}
	schemas, err := pg.QueryStrings(ctx, conn, "SELECT 'schema ' || pg_catalog.quote_ident(n) FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY u(n, i) WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = n) ORDER BY i", s.schemas)
	if err != nil {
		return fmt.Errorf("inspect target: %w", err)
	}
	found = append(found, schemas...)
	if len(found) > 0 {
		list := strings.Join(found[:min(len(found), 5)], ", ")
		if len(found) > 5 {
			list += fmt.Sprintf(" and %d more", len(found)-5)
		}
		return fmt.Errorf("target database %q already has %s: drop it first or use --clean", cfg.Database, list)
	}
	return nil
}

// existing returns those of the quoted, qualified relation names that
// exist in conn's database, in one query however many there are.
func existing(ctx context.Context, conn *pgx.Conn, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	found, err := pg.QueryStrings(ctx, conn, "SELECT n FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY u(n, i) WHERE pg_catalog.to_regclass(n) IS NOT NULL ORDER BY i", names)
	if err != nil {
		return nil, fmt.Errorf("inspect target: %w", err)
	}
	return found, nil
}
