// Package subset chooses the rows of a development copy: the rows of the
// seed tables that match their conditions, optionally the rows that
// reference them (downward, transitively), every row any kept row
// references (upward, transitively: composite, nullable, self and cyclic
// foreign keys, and virtual references the schema does not declare), and
// all or none of the other tables' rows.
//
// Compute runs a fixed point on the dump's leader connection, inside the
// exported snapshot, without writing anything on the source: the kept rows
// are sets of row ids (table OID, ctid) held by the client, grown by joins
// along each reference from all the rows a table got in one step (up to
// a million in one query; downward, one query per child table for all
// the references into it without an index). A self reference (an employee's manager) is
// followed by one recursive query to the end of its chains instead, as
// the fixed point would take one query per link; references between
// tables stay with the fixed point, which a recursive query cannot hold
// (one working table, one row type). The dump and clone workers then read
// exactly those rows, in the same snapshot, by their ctids (Chosen.Apply).
// See docs/ARCHITECTURE.md, "Subsets".
package subset

import (
	"fmt"
	"strings"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/listfile"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Others say what happens to the tables no rule reaches.
const (
	OthersAll  = "all"
	OthersNone = "none"
)

// Spec is what the user asked for: --subset, --subset-children,
// --subset-others, --subset-ref (or a --subset-file holding them).
type Spec struct {
	Seeds    []Seed
	Children bool
	Others   string // OthersAll (default) or OthersNone
	Refs     []Ref
}

// Active says whether a subset was asked for.
func (s Spec) Active() bool { return len(s.Seeds) > 0 }

// Seed is one --subset 'table: condition'.
type Seed struct {
	Table string // a table name as SQL spells it ("app.orders", "\"My\".t")
	Where string // an SQL condition on the table's columns
}

// Ref is a virtual reference, --subset-ref 'child(cols) -> parent(cols)':
// a foreign key the schema does not declare, followed like one.
type Ref struct {
	Child, Parent               string   // table names as SQL spells them
	ChildColumns, ParentColumns []string // column names, unquoted
	Text                        string   // as given
}

// ParseSeed reads "schema.table: condition". The name ends at the first
// colon outside double quotes.
func ParseSeed(s string) (Seed, error) { return parseSeed("--subset", s) }

// parseSeed is ParseSeed for a rule given as what: the flag, or a
// --subset-file's rule word, which its errors name.
func parseSeed(what, s string) (Seed, error) {
	name, rest, ok := pg.CutOutsideQuotes(s, ':')
	name, rest = strings.TrimSpace(name), strings.TrimSpace(rest)
	if !ok || name == "" || rest == "" {
		return Seed{}, fmt.Errorf("%s %q: want 'schema.table: WHERE-condition'", what, s)
	}
	return Seed{Table: name, Where: rest}, nil
}

// ParseRef reads "schema.child(col, ...) -> schema.parent(col, ...)".
func ParseRef(s string) (Ref, error) { return parseRef("--subset-ref", s) }

// parseRef is ParseRef for a rule given as what (see parseSeed).
func parseRef(what, s string) (Ref, error) {
	bad := fmt.Errorf("%s %q: want 'schema.table(column, ...) -> schema.table(column, ...)'", what, s)
	left, right, ok := pg.CutOutsideQuotes(s, '-')
	if !ok || !strings.HasPrefix(right, ">") {
		return Ref{}, bad
	}
	r := Ref{Text: strings.TrimSpace(s)}
	var err error
	if r.Child, r.ChildColumns, err = parseRelColumns(left); err != nil {
		return Ref{}, fmt.Errorf("%w: %v", bad, err)
	}
	if r.Parent, r.ParentColumns, err = parseRelColumns(right[1:]); err != nil {
		return Ref{}, fmt.Errorf("%w: %v", bad, err)
	}
	if len(r.ChildColumns) != len(r.ParentColumns) {
		return Ref{}, fmt.Errorf("%w: %d columns reference %d", bad, len(r.ChildColumns), len(r.ParentColumns))
	}
	return r, nil
}

// ParseOthers reads --subset-others.
func ParseOthers(s string) (string, error) { return parseOthers("--subset-others", s) }

// parseOthers is ParseOthers for a rule given as what (see parseSeed).
func parseOthers(what, s string) (string, error) {
	switch s {
	case "", OthersAll:
		return OthersAll, nil
	case OthersNone:
		return OthersNone, nil
	}
	return "", fmt.Errorf("%s %q: want all or none", what, s)
}

// ReadFile adds the rules of a --subset-file to spec: one per line,
// "subset TABLE: CONDITION", "ref CHILD(COLS) -> PARENT(COLS)",
// "children", "others all|none"; blank lines and lines starting with #
// are skipped. A file under version control says what a development copy
// holds better than a command line.
func ReadFile(path string, spec *Spec) error {
	return listfile.Lines("--subset-file", path, func(_ int, line string) error {
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		var err error
		switch word {
		case "subset":
			var s Seed
			if s, err = parseSeed(word, rest); err == nil {
				spec.Seeds = append(spec.Seeds, s)
			}
		case "ref":
			var r Ref
			if r, err = parseRef(word, rest); err == nil {
				spec.Refs = append(spec.Refs, r)
			}
		case "children":
			spec.Children = true
		case "others":
			spec.Others, err = parseOthers(word, rest)
		default:
			err = fmt.Errorf("unknown rule %q (want subset, ref, children or others)", word)
		}
		return err
	})
}

// Check validates a spec put together from flags and files.
func (s Spec) Check() error {
	if !s.Active() && (s.Children || len(s.Refs) > 0 || (s.Others != "" && s.Others != OthersAll)) {
		return fmt.Errorf("--subset-children, --subset-others and --subset-ref need at least one --subset")
	}
	return nil
}

// Record is the spec as the archive records it.
func (s Spec) Record() *archive.Subset {
	r := &archive.Subset{Children: s.Children, Others: s.Others}
	if r.Others == "" {
		r.Others = OthersAll
	}
	for _, seed := range s.Seeds {
		r.Seeds = append(r.Seeds, archive.SubsetSeed{Table: seed.Table, Where: seed.Where})
	}
	for _, ref := range s.Refs {
		r.Refs = append(r.Refs, ref.Text)
	}
	return r
}

// parseRelColumns reads "name(col, ...)".
func parseRelColumns(s string) (string, []string, error) {
	s = strings.TrimSpace(s)
	name, rest, ok := pg.CutOutsideQuotes(s, '(')
	name = strings.TrimSpace(name)
	if !ok || name == "" || !strings.HasSuffix(rest, ")") {
		return "", nil, fmt.Errorf("no column list in %q", s)
	}
	var cols []string
	rest = strings.TrimSuffix(rest, ")")
	for {
		col, more, found := pg.CutOutsideQuotes(rest, ',')
		c, err := identifier(strings.TrimSpace(col))
		if err != nil {
			return "", nil, err
		}
		cols = append(cols, c)
		if !found {
			return name, cols, nil
		}
		rest = more
	}
}

// identifier reads one SQL identifier as PostgreSQL does: a quoted one
// as written (doubled quotes made single), an unquoted one folded to lower
// case.
func identifier(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty column name")
	}
	if strings.HasPrefix(s, `"`) {
		if len(s) < 2 || !strings.HasSuffix(s, `"`) {
			return "", fmt.Errorf("unterminated quoted name %s", s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`), nil
	}
	if strings.ContainsAny(s, " \t\"") {
		return "", fmt.Errorf("bad column name %q", s)
	}
	return strings.ToLower(s), nil
}
