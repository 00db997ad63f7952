// Package toc reads the table of contents of a pg_dump custom archive as
// pg_restore prints it, so that restore can run some post-data entries
// itself (in parallel, in a different form) and hand the rest back to
// pg_restore by dump ID. pg_restore stays the authority on each entry's SQL:
// this package only splits its verbose script into entries.
package toc

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Entry is one TOC entry of a pg_restore script, as printed with --verbose.
type Entry struct {
	ID   int    // dump ID, as used by pg_restore -L
	Type string // e.g. "INDEX", "CONSTRAINT", "FK CONSTRAINT", "INDEX ATTACH"
	Name string // pg_dump's tag, e.g. "orders orders_pkey", for messages
	Deps []int  // dump IDs this entry depends on
	// Schema is the entry's namespace as pg_restore prints it ("" for
	// objects in none): with Name, it tells apart same-named objects.
	Schema string
	// Class and OID are the catalog (pg_class OID of pg_class, pg_namespace,
	// ...) and OID of the object in the source; both zero for entries that
	// are not objects of their own (comments, privileges, ...).
	Class, OID uint32
	// SQL is the entry's statements, without pg_restore's comment header.
	SQL string
	// Settings are the session settings (default_tablespace,
	// default_table_access_method) pg_restore had in effect for the entry;
	// they must be applied before SQL when it runs on another connection.
	Settings []string
}

// Script is a parsed `pg_restore --verbose --file=-` output.
type Script struct {
	// Preamble holds the SET and set_config statements pg_restore runs
	// once per session before any entry.
	Preamble []string
	Entries  []Entry
}

// ListIDs returns the dump IDs of a `pg_restore -l` listing, in order.
func ListIDs(list string) ([]int, error) {
	return ReadIDs(strings.NewReader(list))
}

// ReadIDs is ListIDs reading the listing from r as it comes (from
// pg_restore's standard output), without holding its text.
func ReadIDs(r io.Reader) ([]int, error) {
	var ids []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		i := strings.IndexByte(line, ';')
		if i <= 0 {
			return nil, fmt.Errorf("toc: unexpected list line %q", line)
		}
		id, err := strconv.Atoi(line[:i])
		if err != nil {
			return nil, fmt.Errorf("toc: unexpected list line %q", line)
		}
		ids = append(ids, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("toc: read listing: %w", err)
	}
	return ids, nil
}

const (
	entryMarker   = "-- TOC entry "
	statsNameLine = "-- Statistics for Name: "
)

// parse splits a verbose pg_restore script into entries, handing each to
// emit as soon as it is read, and returns the preamble; it checks only
// their number against want. It reads the script line by line and holds
// only the entry being read: at 100,000 tables the script is tens of MB,
// and its entries, even parsed, more than a restore's whole plan.
func parse(r io.Reader, want []int, emit func(*Entry) error) ([]string, error) {
	var preambleStmts []string
	n := 0
	settings := map[string]string{}
	var order []string
	// current is the settings of the entries read now, shared by every
	// entry until one of them changes (entries never modify it).
	var current []string
	var cur *Entry
	var body, pre []string
	var prev string
	started := false
	flush := func() error {
		if cur == nil {
			return nil
		}
		// Trailing session settings belong to the next entry; trailing
		// comments and psql meta-commands to nobody.
		end := len(body)
		changed := false
		for end > 0 {
			l := strings.TrimSpace(body[end-1])
			switch {
			case l == "", strings.HasPrefix(l, "--"), strings.HasPrefix(l, `\`):
				end--
				continue
			case isSessionSetting(l):
				k, _ := settingKey(l)
				if _, seen := settings[k]; !seen {
					order = append(order, k)
				}
				settings[k] = l
				changed = true
				end--
				continue
			}
			break
		}
		if changed {
			current = nil
		}
		cur.SQL = strings.TrimSpace(strings.Join(body[:end], ""))
		e := cur
		cur, body = nil, body[:0]
		n++
		return emit(e)
	}
	lines := &scriptLines{br: bufio.NewReaderSize(r, 64<<10)}
	for lines.next() {
		raw := lines.raw
		line := strings.TrimRight(raw, "\n")
		if strings.HasPrefix(line, entryMarker) && prev == "--" {
			if !started {
				// The preamble is everything before the "--" that
				// opens the first entry's header.
				preambleStmts = preamble(pre[:len(pre)-1], settings, &order)
				pre, started = nil, true
			}
			if err := flush(); err != nil {
				return nil, err
			}
			var err error
			if cur, err = parseHeader(line); err != nil {
				return nil, err
			}
			if current == nil && len(order) > 0 {
				current = make([]string, 0, len(order))
				for _, k := range order {
					current = append(current, settings[k])
				}
			}
			cur.Settings = current
			// Header lines up to the closing "--".
			for lines.next() {
				h := strings.TrimRight(lines.raw, "\n")
				prev = h
				if h == "--" {
					break
				}
				if err := cur.header(h); err != nil {
					return nil, err
				}
			}
			continue
		}
		prev = line
		switch {
		case cur != nil:
			body = append(body, raw)
		case !started:
			pre = append(pre, raw)
		}
	}
	if lines.err != nil {
		return nil, lines.err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if n != len(want) {
		return nil, fmt.Errorf("toc: script has %d entries, listing has %d", n, len(want))
	}
	return preambleStmts, nil
}

// scriptLines reads a script line by line, as bufio.Scanner would but with
// no limit on a line's length (a function's body is one entry's line); the
// first read error stops it and is kept in err.
type scriptLines struct {
	br  *bufio.Reader
	raw string // the line read, with its newline
	err error
}

// next reads the next line into raw, saying whether there was one.
func (s *scriptLines) next() bool {
	if s.err != nil {
		return false
	}
	l, err := s.br.ReadString('\n')
	switch {
	case err == io.EOF:
		s.raw = l
		return l != ""
	case err != nil:
		s.err = fmt.Errorf("toc: read script: %w", err)
		return false
	}
	s.raw = l
	return true
}

// header reads one line of an entry's comment header into e: its
// dependencies, or its name and type.
func (e *Entry) header(h string) error {
	switch {
	case strings.HasPrefix(h, "-- Dependencies: "):
		for _, f := range strings.Fields(strings.TrimPrefix(h, "-- Dependencies: ")) {
			d, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("toc: bad dependency line %q", h)
			}
			e.Deps = append(e.Deps, d)
		}
	case strings.HasPrefix(h, "-- Name: "), strings.HasPrefix(h, statsNameLine):
		// pg_dump 18 heads STATISTICS DATA entries
		// "-- Statistics for Name: ...".
		h = strings.TrimPrefix(h, "-- Statistics for Name: ")
		h = strings.TrimPrefix(h, "-- Name: ")
		k := strings.LastIndex(h, "; Type: ")
		if k < 0 {
			return fmt.Errorf("toc: bad name line %q", h)
		}
		e.Name = strings.Clone(h[:k])
		t := h[k+len("; Type: "):]
		if j := strings.Index(t, "; Schema: "); j >= 0 {
			sc := t[j+len("; Schema: "):]
			if o := strings.LastIndex(sc, "; Owner: "); o >= 0 {
				sc = sc[:o]
			}
			if sc != "-" {
				e.Schema = strings.Clone(sc)
			}
			t = t[:j]
		}
		e.Type = entryType(t)
	}
	return nil
}

// entryType returns t, sharing one string for the common types so that
// 100,000 entries do not each hold a copy (and their header line) of it.
func entryType(t string) string {
	for _, c := range commonTypes {
		if t == c {
			return c
		}
	}
	return strings.Clone(t)
}

// commonTypes are the post-data entry types a schema of many tables has
// one or more of per table.
var commonTypes = [...]string{"INDEX", "CONSTRAINT", "FK CONSTRAINT", "CHECK CONSTRAINT", "INDEX ATTACH", "TRIGGER", "COMMENT", "ACL", "TABLE", "SEQUENCE", "SEQUENCE OWNED BY", "DEFAULT", "STATISTICS DATA"}

// ParseScript splits a verbose pg_restore script into entries. want is the
// listing's dump IDs for the same selection (from ListIDs): the parse is
// refused unless it finds exactly those entries in that order, so that text
// inside an entry that merely looks like a header can never go unnoticed.
func ParseScript(script string, want []int) (*Script, error) {
	return ReadScript(strings.NewReader(script), want)
}

// ReadScript is ParseScript reading the script from r as it comes (from
// pg_restore's standard output), without holding its text.
func ReadScript(r io.Reader, want []int) (*Script, error) {
	s := &Script{Entries: make([]Entry, 0, len(want))}
	pre, err := EachEntry(r, want, func(e *Entry) error {
		s.Entries = append(s.Entries, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Preamble = pre
	return s, nil
}

// EachEntry is ReadScript handing each entry to fn as soon as it is read,
// in the script's order, instead of collecting them: a caller that turns
// entries into something smaller never holds them all. It returns the
// script's preamble. Entries are checked against want one by one, so an
// error may come after fn has seen some of them; fn's error stops the read
// and is returned as it is.
func EachEntry(r io.Reader, want []int, fn func(*Entry) error) ([]string, error) {
	i := 0
	return parse(r, want, func(e *Entry) error {
		if i >= len(want) || e.ID != want[i] || e.Type == "" {
			id := -1
			if i < len(want) {
				id = want[i]
			}
			return fmt.Errorf("toc: script entry %d is dump ID %d (type %q), listing has %d", i, e.ID, e.Type, id)
		}
		i++
		return fn(e)
	})
}

// ParseWhole is ParseScript for the script of a whole archive, in which
// pg_restore moves some entries (privileges, event triggers, matview data)
// after the others: the entries must be exactly the listing's, each once,
// in any order.
func ParseWhole(script string, want []int) (*Script, error) {
	s := &Script{Entries: make([]Entry, 0, len(want))}
	pre, err := parse(strings.NewReader(script), want, func(e *Entry) error {
		s.Entries = append(s.Entries, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.Preamble = pre
	left := map[int]bool{}
	for _, id := range want {
		left[id] = true
	}
	for _, e := range s.Entries {
		if !left[e.ID] || e.Type == "" {
			return nil, fmt.Errorf("toc: script has dump ID %d (type %q) twice or not in the listing", e.ID, e.Type)
		}
		delete(left, e.ID)
	}
	return s, nil
}

// parseHeader reads "-- TOC entry 217 (class 1259 OID 16387)".
func parseHeader(line string) (*Entry, error) {
	var id int
	var class, oid uint32
	n, _ := fmt.Sscanf(strings.TrimPrefix(line, entryMarker), "%d (class %d OID %d)", &id, &class, &oid)
	if n < 1 {
		return nil, fmt.Errorf("toc: bad entry header %q", line)
	}
	return &Entry{ID: id, Class: class, OID: oid}, nil
}

// preamble collects the session statements before the first entry.
func preamble(lines []string, settings map[string]string, order *[]string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(strings.Join(lines, "")))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case isSessionSetting(l):
			k, _ := settingKey(l)
			if _, seen := settings[k]; !seen {
				*order = append(*order, k)
			}
			settings[k] = l
		case strings.HasPrefix(l, "SET ") && strings.HasSuffix(l, ";"),
			strings.HasPrefix(l, "SELECT pg_catalog.set_config(") && strings.HasSuffix(l, ";"):
			out = append(out, l)
		}
	}
	return out
}

// isSessionSetting reports whether l is one of the settings pg_restore
// changes between entries.
func isSessionSetting(l string) bool {
	k, ok := settingKey(l)
	return ok && (k == "default_tablespace" || k == "default_table_access_method")
}

func settingKey(l string) (string, bool) {
	if !strings.HasPrefix(l, "SET ") || !strings.HasSuffix(l, ";") {
		return "", false
	}
	f := strings.Fields(l)
	if len(f) < 4 || f[2] != "=" {
		return "", false
	}
	return f[1], true
}
