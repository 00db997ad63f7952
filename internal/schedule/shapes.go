package schedule

import (
	"strings"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// The statement shapes below are exactly what pg_dump writes for indexes
// and constraints; anything else does not match and is left to pg_restore.

// cursor walks a statement's tokens.
type cursor struct {
	toks []toc.Token
	i    int
}

func (c *cursor) word(w ...string) bool {
	for k, x := range w {
		if c.i+k >= len(c.toks) || c.toks[c.i+k].Kind != toc.Word || c.toks[c.i+k].Text != x {
			return false
		}
	}
	c.i += len(w)
	return true
}

func (c *cursor) punct(p string) bool {
	if c.i < len(c.toks) && c.toks[c.i].Kind == toc.Punct && c.toks[c.i].Text == p {
		c.i++
		return true
	}
	return false
}

func (c *cursor) ident() (toc.Token, bool) {
	if c.i < len(c.toks) && c.toks[c.i].IsIdent() {
		c.i++
		return c.toks[c.i-1], true
	}
	return toc.Token{}, false
}

// qualified reads schema.name and returns its lock key and its text.
func (c *cursor) qualified() (key, text string, ok bool) {
	s, ok1 := c.ident()
	if !ok1 || !c.punct(".") {
		return "", "", false
	}
	n, ok2 := c.ident()
	if !ok2 {
		return "", "", false
	}
	return taskgraph.TableKey(s.Ident(), n.Ident()), s.Text + "." + n.Text, true
}

// identList reads "( a, b, ... )" and returns its text.
func (c *cursor) identList() (string, bool) {
	if !c.punct("(") {
		return "", false
	}
	var names []string
	for {
		t, ok := c.ident()
		if !ok {
			return "", false
		}
		names = append(names, t.Text)
		if c.punct(")") {
			return "(" + strings.Join(names, ", ") + ")", true
		}
		if !c.punct(",") {
			return "", false
		}
	}
}

// balanced reads "( ... )" with nested parentheses and returns its tokens'
// text as written.
func (c *cursor) balanced() (string, bool) {
	start := c.i
	if !c.punct("(") {
		return "", false
	}
	for depth := 1; depth > 0; c.i++ {
		if c.i >= len(c.toks) {
			return "", false
		}
		if t := c.toks[c.i]; t.Kind == toc.Punct {
			switch t.Text {
			case "(":
				depth++
			case ")":
				depth--
			}
		}
	}
	return toc.Join(c.toks[start:c.i]), true
}

func (c *cursor) end() bool { return c.i == len(c.toks)-1 && c.punct(";") }

// indexTable returns the table of "CREATE [UNIQUE] INDEX name ON [ONLY]
// schema.table ...".
func indexTable(toks []toc.Token) (string, bool) {
	c := &cursor{toks: toks}
	if !c.word("CREATE") {
		return "", false
	}
	c.word("UNIQUE")
	if !c.word("INDEX") {
		return "", false
	}
	if _, ok := c.ident(); !ok || !c.word("ON") {
		return "", false
	}
	c.word("ONLY")
	key, _, ok := c.qualified()
	return key, ok
}

// alterTable returns the table of "ALTER TABLE [ONLY] schema.table ...".
func alterTable(toks []toc.Token) (string, bool) {
	c := &cursor{toks: toks}
	if !c.word("ALTER", "TABLE") {
		return "", false
	}
	c.word("ONLY")
	key, _, ok := c.qualified()
	return key, ok
}

// only reports whether an ALTER TABLE statement is limited to one table.
func only(toks []toc.Token) bool {
	c := &cursor{toks: toks}
	return c.word("ALTER", "TABLE", "ONLY")
}

// isAttach matches "ALTER INDEX schema.index ATTACH PARTITION schema.index;".
func isAttach(toks []toc.Token) bool {
	c := &cursor{toks: toks}
	if !c.word("ALTER", "INDEX") {
		return false
	}
	if _, _, ok := c.qualified(); !ok || !c.word("ATTACH", "PARTITION") {
		return false
	}
	_, _, ok := c.qualified()
	return ok && c.end()
}

// uniqueConstraint is a PRIMARY KEY or UNIQUE constraint as pg_dump writes
// it: ALTER TABLE ONLY t ADD CONSTRAINT c PRIMARY KEY|UNIQUE [NULLS NOT
// DISTINCT] (cols) [INCLUDE (cols)] [WITH (opts)] [DEFERRABLE [INITIALLY
// DEFERRED]];
type uniqueConstraint struct {
	table, name          string // as written
	kind                 string // "PRIMARY KEY" or "UNIQUE"
	nullsNotDistinct     bool
	cols, include        string
	with                 string
	deferrable, deferred bool
}

func parseUniqueConstraint(toks []toc.Token) (*uniqueConstraint, bool) {
	c := &cursor{toks: toks}
	u := &uniqueConstraint{}
	var ok bool
	if !c.word("ALTER", "TABLE", "ONLY") {
		return nil, false
	}
	if _, u.table, ok = c.qualified(); !ok || !c.word("ADD", "CONSTRAINT") {
		return nil, false
	}
	n, ok := c.ident()
	if !ok {
		return nil, false
	}
	u.name = n.Text
	switch {
	case c.word("PRIMARY", "KEY"):
		u.kind = "PRIMARY KEY"
	case c.word("UNIQUE"):
		u.kind = "UNIQUE"
	default:
		return nil, false
	}
	u.nullsNotDistinct = c.word("NULLS", "NOT", "DISTINCT")
	if u.cols, ok = c.identList(); !ok {
		return nil, false
	}
	if c.word("INCLUDE") {
		if u.include, ok = c.identList(); !ok {
			return nil, false
		}
	}
	if c.word("WITH") {
		if u.with, ok = c.balanced(); !ok {
			return nil, false
		}
	}
	if c.word("DEFERRABLE") {
		u.deferrable = true
		u.deferred = c.word("INITIALLY", "DEFERRED")
	}
	return u, c.end()
}

// createIndex builds the constraint's index without the constraint, under
// a SHARE lock that lets other indexes of the table build at the same time.
func (u *uniqueConstraint) createIndex() string {
	var b strings.Builder
	b.WriteString("CREATE UNIQUE INDEX " + u.name + " ON " + u.table + " USING btree " + u.cols)
	if u.include != "" {
		b.WriteString(" INCLUDE " + u.include)
	}
	if u.nullsNotDistinct {
		b.WriteString(" NULLS NOT DISTINCT")
	}
	if u.with != "" {
		b.WriteString(" WITH " + u.with)
	}
	return b.String() + ";"
}

// attach turns the index into the constraint: a catalog change only.
func (u *uniqueConstraint) attach() string {
	s := "ALTER TABLE ONLY " + u.table + " ADD CONSTRAINT " + u.name + " " + u.kind + " USING INDEX " + u.name
	if u.deferrable {
		s += " DEFERRABLE"
		if u.deferred {
			s += " INITIALLY DEFERRED"
		}
	}
	return s + ";"
}

// foreignKey is "ALTER TABLE ONLY t ADD CONSTRAINT c FOREIGN KEY (...)
// REFERENCES s.r(...) ...;" as pg_dump writes it for a plain table.
type foreignKey struct {
	table, refTable string // lock keys
	tableText, name string
	text            string // the statement without its semicolon
	notValid        bool   // NOT VALID in the source: restore it so
}

func parseForeignKey(st toc.Statement) (*foreignKey, bool) {
	toks := st.Tokens
	c := &cursor{toks: toks}
	f := &foreignKey{}
	var ok bool
	if !c.word("ALTER", "TABLE", "ONLY") {
		return nil, false
	}
	if f.table, f.tableText, ok = c.qualified(); !ok || !c.word("ADD", "CONSTRAINT") {
		return nil, false
	}
	n, ok := c.ident()
	if !ok || !c.word("FOREIGN", "KEY") {
		return nil, false
	}
	f.name = n.Text
	if _, ok := c.identList(); !ok || !c.word("REFERENCES") {
		return nil, false
	}
	if f.refTable, _, ok = c.qualified(); !ok {
		return nil, false
	}
	if _, ok := c.identList(); !ok {
		return nil, false
	}
	// The rest is MATCH / ON DELETE / ON UPDATE / DEFERRABLE options.
	for c.i < len(toks)-1 {
		if toks[c.i].Kind != toc.Word {
			if c.punct("(") { // ON DELETE SET NULL (cols)
				for c.i < len(toks)-1 && !c.punct(")") {
					c.i++
				}
				continue
			}
			return nil, false
		}
		c.i++
	}
	if !c.end() {
		return nil, false
	}
	n2 := len(toks)
	f.notValid = n2 >= 3 && toks[n2-3].Text == "NOT" && toks[n2-2].Text == "VALID"
	f.text = strings.TrimSpace(strings.TrimSuffix(st.Text, ";"))
	return f, true
}

// addNotValid adds the key without checking existing rows.
func (f *foreignKey) addNotValid() string { return f.text + " NOT VALID;" }

// validate checks existing rows under a lock that lets other validations
// and reads of both tables run.
func (f *foreignKey) validate() string {
	return "ALTER TABLE ONLY " + f.tableText + " VALIDATE CONSTRAINT " + f.name + ";"
}
