package toc

import (
	"fmt"
	"strconv"
	"strings"
)

// ListEntry is one entry line of a `pg_restore --list` listing:
// "219; 1259 16385 TABLE public t postgres".
type ListEntry struct {
	ID         int
	Class, OID uint32
	// Desc is the rest of the line after the OID: the entry's type,
	// namespace, tag and owner as pg_restore prints them (names are not
	// quoted, so this is for display and for matching a known type
	// prefix, never for reading names back).
	Desc string
	// Line is the whole line, as printed.
	Line string
}

// ParseList reads a `pg_restore --list` listing: its leading comment lines
// (the archive's header) and its entries, in order.
func ParseList(list string) (header []string, entries []ListEntry, err error) {
	for _, line := range strings.Split(strings.TrimRight(list, "\n"), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, ";") {
			if len(entries) == 0 {
				header = append(header, line)
			}
			continue
		}
		e, ok := parseListLine(t)
		if !ok {
			return nil, nil, fmt.Errorf("toc: unexpected list line %q", line)
		}
		entries = append(entries, e)
	}
	return header, entries, nil
}

// parseListLine reads "ID; CLASS OID DESC".
func parseListLine(line string) (ListEntry, bool) {
	i := strings.IndexByte(line, ';')
	if i <= 0 {
		return ListEntry{}, false
	}
	id, err := strconv.Atoi(line[:i])
	if err != nil {
		return ListEntry{}, false
	}
	f := strings.SplitN(strings.TrimSpace(line[i+1:]), " ", 3)
	if len(f) < 3 {
		return ListEntry{}, false
	}
	class, err1 := strconv.ParseUint(f[0], 10, 32)
	oid, err2 := strconv.ParseUint(f[1], 10, 32)
	if err1 != nil || err2 != nil {
		return ListEntry{}, false
	}
	return ListEntry{ID: id, Class: uint32(class), OID: uint32(oid), Desc: f[2], Line: line}, true
}

// UseListLine is one line of a pg_restore --use-list file that names an
// entry, kept or commented out.
type UseListLine struct {
	Number    int // line number in the file, from 1
	ID        int
	Commented bool
}

// ParseUseList reads a list file as pg_restore -L does: each line that
// starts with a dump ID followed by ";" selects that entry; a line starting
// with ";" is a comment, and if what follows the ";" is an entry line, that
// entry is listed but left out. Blank lines are ignored; any other line is
// an error naming its number.
func ParseUseList(text string) ([]UseListLine, error) {
	var out []UseListLine
	for n, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if t == "" {
			continue
		}
		commented := strings.HasPrefix(t, ";")
		body := strings.TrimSpace(strings.TrimLeft(t, ";"))
		id, ok := leadingID(body)
		switch {
		case ok:
			out = append(out, UseListLine{Number: n + 1, ID: id, Commented: commented})
		case !commented:
			return nil, fmt.Errorf("line %d: %q is neither an entry (\"ID; ...\") nor a comment (\";...\")", n+1, t)
		}
	}
	return out, nil
}

// leadingID reads the dump ID of "ID;..." or of a bare "ID".
func leadingID(s string) (int, bool) {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	rest := strings.TrimSpace(s[end:])
	if rest != "" && !strings.HasPrefix(rest, ";") {
		return 0, false
	}
	id, err := strconv.Atoi(s[:end])
	return id, err == nil
}
