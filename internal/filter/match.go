package filter

import (
	"fmt"
	"regexp"
)

// Matched is a selection evaluated on an archive's list of schemas and
// relations rather than on a live catalog: restore has no source to ask.
type Matched struct {
	Schemas   map[string]bool // schemas selected as a whole (-n/-N); none with -t
	Relations map[Rel]bool    // relations selected by name or by schema
	NoData    map[Rel]bool    // relations matched by --exclude-table-data
	// LargeObjects says whether large objects come too: when no -n or -t
	// narrows the selection, or with -b, never with -B
	// (Selection.LargeObjects).
	LargeObjects bool
}

// Match evaluates the selection on the schemas and relations of an archive
// dumped from database db, with the rules Selected applies in SQL. One
// difference, as in pg_restore: a pattern without a schema part matches
// in every schema, since there is no search path to consult.
func (o Options) Match(db string, schemas []string, rels []Rel) (*Matched, error) {
	compile := func(texts []string, schema bool) ([]matcher, error) {
		var ms []matcher
		for _, t := range texts {
			m, err := newMatcher(t, schema, db)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		return ms, nil
	}
	c, err := eachList(o, compile)
	if err != nil {
		return nil, err
	}
	incT, excT, incN, excN, noData := c[0], c[1], c[2], c[3], c[4]
	schemaChosen := func(s string) bool {
		if len(o.Schemas) > 0 && !anyMatch(incN, s, "") {
			return false
		}
		return !anyMatch(excN, s, "")
	}
	out := &Matched{Schemas: map[string]bool{}, Relations: map[Rel]bool{}, NoData: map[Rel]bool{},
		LargeObjects: o.LargeObjects()}
	if len(o.Tables) == 0 {
		for _, s := range schemas {
			if schemaChosen(s) {
				out.Schemas[s] = true
			}
		}
	}
	for _, r := range rels {
		var sel bool
		if len(o.Tables) > 0 {
			sel = anyMatch(incT, r.Schema, r.Name)
		} else {
			sel = schemaChosen(r.Schema)
		}
		if sel && !anyMatch(excT, r.Schema, r.Name) {
			out.Relations[r] = true
		}
		if anyMatch(noData, r.Schema, r.Name) {
			out.NoData[r] = true
		}
	}
	if o.StrictNames {
		if err := strict(o.Tables, incT, o.Schemas, incN, schemas, rels); err != nil {
			return nil, err
		}
	}
	switch {
	case len(o.Tables) > 0 && len(out.Relations) == 0:
		return nil, &NoMatchError{What: "tables"}
	case len(o.Tables) == 0 && len(o.Schemas) > 0 && len(out.Schemas) == 0:
		return nil, &NoMatchError{What: "schemas"}
	}
	return out, nil
}

// NoMatchError is Match finding nothing that -t (or -n) selects, in pg_dump's
// words; In names where it looked (the archive, a clone's source), which the
// caller knows and Match does not.
type NoMatchError struct {
	What string // "tables" or "schemas"
	In   string // e.g. "the archive"; empty: not said
}

// Error implements error.
func (e *NoMatchError) Error() string {
	if e.In == "" {
		return fmt.Sprintf("no matching %s were found", e.What)
	}
	return fmt.Sprintf("no matching %s were found in %s", e.What, e.In)
}

// CheckDatabase refuses three-part names (db.schema.table) and two-part
// schema names (db.schema) whose database part does not match db, as
// pg_dump does ("cross-database references are not implemented").
func (o Options) CheckDatabase(db string) error {
	for _, set := range []struct {
		texts  []string
		schema bool
	}{{o.Tables, false}, {o.ExcludeTables, false}, {o.ExcludeTableData, false}, {o.Schemas, true}, {o.ExcludeSchemas, true}} {
		for _, t := range set.texts {
			if _, err := newMatcher(t, set.schema, db); err != nil {
				return err
			}
		}
	}
	return nil
}

// matcher is a Pattern compiled for matching in Go.
type matcher struct {
	schema, name *regexp.Regexp // nil: any
}

func newMatcher(text string, schema bool, db string) (matcher, error) {
	p, err := parse(text, schema)
	if err != nil {
		return matcher{}, err
	}
	if p.Database != "" {
		re, err := regexp.Compile("(?s)" + p.Database)
		if err != nil || !re.MatchString(db) {
			return matcher{}, fmt.Errorf("cross-database references are not implemented: %s", text)
		}
	}
	var m matcher
	for _, f := range []struct {
		re  string
		dst **regexp.Regexp
	}{{p.Schema, &m.schema}, {p.Name, &m.name}} {
		if f.re == "" {
			continue
		}
		// (?s): in PostgreSQL's regular expressions . matches a newline.
		if *f.dst, err = regexp.Compile("(?s)" + f.re); err != nil {
			return matcher{}, fmt.Errorf("pattern %s: %w", text, err)
		}
	}
	return m, nil
}

func (m matcher) match(schema, name string) bool {
	return (m.schema == nil || m.schema.MatchString(schema)) && (m.name == nil || m.name.MatchString(name))
}

// anyMatch matches a relation (schema, name) or, with name empty, a
// schema against any of ms.
func anyMatch(ms []matcher, schema, name string) bool {
	for _, m := range ms {
		if name == "" && m.schema == nil {
			continue
		}
		if m.match(schema, name) {
			return true
		}
	}
	return false
}

// strict is --strict-names: every -t pattern matches a relation and every
// -n pattern a schema of the archive, or the restore is refused.
func strict(tables []string, incT []matcher, schemas []string, incN []matcher, names []string, rels []Rel) error {
	for i, m := range incT {
		found := false
		for _, r := range rels {
			found = found || m.match(r.Schema, r.Name)
		}
		if !found {
			return fmt.Errorf("no matching tables were found for pattern %q (--strict-names)", tables[i])
		}
	}
	for i, m := range incN {
		found := false
		for _, s := range names {
			found = found || (m.schema != nil && m.match(s, ""))
		}
		if !found {
			return fmt.Errorf("no matching schemas were found for pattern %q (--strict-names)", schemas[i])
		}
	}
	return nil
}

// eachList turns each pattern list of o, with compile, into what selects
// by it: SQL conditions or Go matchers are built from the same five lists
// in the same order (tables, excluded tables, schemas, excluded schemas,
// excluded table data), so that the first bad pattern is named alike.
func eachList[T any](o Options, compile func(patterns []string, schema bool) (T, error)) ([5]T, error) {
	lists := [5]struct {
		patterns []string
		schema   bool
	}{{o.Tables, false}, {o.ExcludeTables, false}, {o.Schemas, true}, {o.ExcludeSchemas, true}, {o.ExcludeTableData, false}}
	var out [5]T
	for i, l := range lists {
		var err error
		if out[i], err = compile(l.patterns, l.schema); err != nil {
			return out, err
		}
	}
	return out, nil
}
