package preflight

import (
	"strings"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// Kinds of things a schema entry may need of its target, each one line
// of the checklist (Lacks).
const (
	needExtension   = "extension"
	needProvider    = "collation provider"
	needCollation   = "collation"
	needCompression = "compression method"
	needRole        = "role"
	needOwner       = "owner" // a role to give objects to: created without it
	needTablespace  = "tablespace"
)

// need is one thing an entry needs of the target: an extension to create,
// a collation provider, a built-in collation, a TOAST compression method,
// a role named in a grant or a policy, a role to own it, a tablespace.
type need struct {
	kind, name string
	entry      int // the entry's dump ID
}

// partial reports whether an entry that lacks n is still created (owned
// by the restoring role, in the default tablespace) rather than not at
// all: pg_restore reports the error and goes on, as --keep-going records
// it (restore's entryError.partial).
func (n need) partial() bool { return n.kind == needOwner || n.kind == needTablespace }

// needs reads what each entry needs of the target from its SQL as
// pg_restore would run it (owners and grants only as the flags leave them
// in) and its session settings. The DATABASE entry counts only with
// --create (create): pg_restore runs it only then. Function bodies are
// string literals to the tokenizer, and are not read: pg_restore creates
// them without checking them.
func needs(entries []toc.Entry, create bool) []need {
	var out []need
	for _, e := range entries {
		if e.Type == "DATABASE" && !create {
			continue
		}
		add := func(kind, name string) { out = append(out, need{kind: kind, name: name, entry: e.ID}) }
		if e.Type == "EXTENSION" {
			add(needExtension, e.Name)
		}
		for _, s := range e.Settings {
			if ts, ok := strings.CutPrefix(s, "SET default_tablespace = "); ok {
				if ts = strings.TrimSuffix(ts, ";"); ts != "" && ts != "''" {
					add(needTablespace, unquote(ts))
				}
			}
		}
		stmts, err := toc.Statements(e.SQL)
		if err != nil {
			continue // pg_restore's own SQL: not reached
		}
		for _, st := range stmts {
			for _, n := range statementNeeds(st.Tokens) {
				add(n.kind, n.name)
			}
		}
	}
	return out
}

// statementNeeds reads one statement's needs: "provider = icu" (CREATE
// COLLATION) and "LOCALE_PROVIDER = icu" (CREATE DATABASE), "COLLATE
// pg_catalog.x" (a built-in collation the target may not have: the
// archive's own collations come with it), "COMPRESSION lz4", "OWNER TO
// r", the grantees of GRANT and REVOKE, "FOR ROLE r" and the roles of a
// policy.
func statementNeeds(toks []toc.Token) []need {
	var out []need
	word := func(i int, w string) bool {
		return i >= 0 && i < len(toks) && toks[i].Kind == toc.Word && strings.EqualFold(toks[i].Text, w)
	}
	ident := func(i int) bool { return i < len(toks) && toks[i].IsIdent() }
	first := ""
	if len(toks) > 0 {
		first = strings.ToUpper(toks[0].Text)
	}
	policy := (first == "CREATE" || first == "ALTER") && word(1, "POLICY")
	defaults := first == "ALTER" && word(1, "DEFAULT") // ALTER DEFAULT PRIVILEGES
	for i := 0; i < len(toks); i++ {
		switch {
		case (word(i, "provider") || word(i, "locale_provider")) && i+2 < len(toks) && toks[i+1].Text == "=" && ident(i+2):
			add := strings.ToLower(toks[i+2].Ident())
			if add != "libc" {
				out = append(out, need{kind: needProvider, name: add})
			}
		case word(i, "COLLATE") && ident(i+1):
			if word(i+1, "pg_catalog") && i+3 < len(toks) && toks[i+2].Text == "." && ident(i+3) {
				out = append(out, need{kind: needCollation, name: toks[i+3].Ident()})
			}
		case word(i, "COMPRESSION") && ident(i+1) && !word(i+1, "default"):
			out = append(out, need{kind: needCompression, name: strings.ToLower(toks[i+1].Ident())})
		case word(i, "OWNER") && word(i+1, "TO") && ident(i+2):
			out = append(out, need{kind: needOwner, name: toks[i+2].Ident()})
		case word(i, "FOR") && word(i+1, "ROLE") && ident(i+2):
			out = append(out, need{kind: needRole, name: toks[i+2].Ident()})
		case (first == "GRANT" || defaults || policy) && word(i, "TO"), (first == "REVOKE" || defaults) && word(i, "FROM"):
			for j := i + 1; j < len(toks) && ident(j); j += 2 {
				if r := role(toks[j]); r != "" {
					out = append(out, need{kind: needRole, name: r})
				}
				if j+1 >= len(toks) || toks[j+1].Text != "," {
					break
				}
			}
		}
	}
	return out
}

// role is the role a grantee token names, or "" for PUBLIC and the
// keywords that stand for the current role.
func role(t toc.Token) string {
	if t.Kind == toc.Word {
		switch strings.ToUpper(t.Text) {
		case "PUBLIC", "CURRENT_USER", "CURRENT_ROLE", "SESSION_USER", "GROUP", "WITH", "GRANTED", "CASCADE", "RESTRICT":
			return ""
		}
	}
	return t.Ident()
}

// unquote is the name a setting's value names: "x", or x.
func unquote(s string) string {
	if toks, err := toc.Tokenize(s); err == nil && len(toks) == 1 && toks[0].IsIdent() {
		return toks[0].Ident()
	}
	return s
}
