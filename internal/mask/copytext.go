package mask

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// TableMask is how one table's rows are masked: its masked columns by their
// place in the COPY row (the table's column list, generated columns left
// out, as dump reads it).
type TableMask struct {
	name    string // quoted, qualified
	columns int    // fields in a row
	masked  []column
	secret  []byte
}

// Writer rewrites COPY text rows of the table written through it: each
// row's masked fields are unescaped, replaced and escaped again; the
// other fields are copied as they are. Rows may come in pieces (a Write
// need not end at a row's end). Close fails on a row cut short.
func (t *TableMask) Writer(w io.Writer) *Writer {
	m := &Writer{w: w, t: t, k: newKeyer(t.secret), plain: make([]bool, len(t.masked)), memos: make([]memo, len(t.masked))}
	for i := range t.masked {
		m.plain[i] = t.masked[i].rule.plain()
	}
	return m
}

// Writer is a Table's row rewriter (Table.Writer).
type Writer struct {
	w       io.Writer
	t       *TableMask
	k       *keyer
	partial []byte // the start of a row whose end has not come yet
	out     []byte
	value   []byte
	masked  []byte
	plain   []bool // by masked column: its rule writes nothing COPY text escapes
	memos   []memo // by masked column
}

// Write masks the complete rows of p and writes them; a row's start
// without its end waits for the next Write.
func (m *Writer) Write(p []byte) (int, error) {
	n := len(p)
	m.out = m.out[:0]
	if len(m.partial) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.partial = append(m.partial, p...)
			return n, nil
		}
		m.partial = append(m.partial, p[:i]...)
		if err := m.row(m.partial); err != nil {
			return 0, err
		}
		m.partial = m.partial[:0]
		p = p[i+1:]
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.partial = append(m.partial, p...)
			break
		}
		if err := m.row(p[:i]); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	if len(m.out) > 0 {
		if _, err := m.w.Write(m.out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Close fails if a row was left without its end.
func (m *Writer) Close() error {
	if len(m.partial) > 0 {
		return fmt.Errorf("mask %s: the last row was cut short", m.t.name)
	}
	return nil
}

// row appends the masked row (without its newline) and a newline to m.out.
func (m *Writer) row(line []byte) error {
	next, field := 0, 0
	for ci := range m.t.masked {
		c := &m.t.masked[ci]
		// Copy the fields before c as they are.
		for field < c.index {
			i := bytes.IndexByte(line[next:], '\t')
			if i < 0 {
				return m.short()
			}
			next += i + 1
			field++
		}
		end := bytes.IndexByte(line[next:], '\t')
		last := end < 0
		if last {
			end = len(line)
		} else {
			end += next
		}
		m.out = append(m.out, line[:next]...)
		raw := line[next:end]
		if string(raw) == `\N` {
			m.out = append(m.out, raw...)
		} else if out, ok := m.memos[ci].get(raw); ok {
			m.out = append(m.out, out...)
		} else {
			start := len(m.out)
			m.field(ci, raw)
			m.memos[ci].put(raw, m.out[start:])
		}
		if last {
			if field+1 < m.t.columns {
				return m.short()
			}
			line = nil
		} else {
			m.out = append(m.out, '\t')
			line = line[end+1:]
		}
		next = 0
		field++
	}
	m.out = append(m.out, line...)
	m.out = append(m.out, '\n')
	return nil
}

// field appends the COPY text of masked column ci's value for raw (a
// field's COPY text, not NULL) to m.out.
func (m *Writer) field(ci int, raw []byte) {
	c := &m.t.masked[ci]
	m.value = unescape(m.value[:0], raw)
	if m.plain[ci] {
		m.out, _ = c.apply(m.k, m.value, m.out)
		return
	}
	var null bool
	m.masked, null = c.apply(m.k, m.value, m.masked[:0])
	if null {
		m.out = append(m.out, `\N`...)
	} else {
		m.out = escape(m.out, m.masked)
	}
}

func (m *Writer) short() error {
	return fmt.Errorf("mask %s: a row has fewer than %d fields", m.t.name, m.t.columns)
}

// unescape decodes one field of COPY text (backslash escapes: \b \f \n \r
// \t \v \\, octal \NNN, hexadecimal \xHH; any other character after a
// backslash stands for itself), appending to out.
func unescape(out, f []byte) []byte {
	if bytes.IndexByte(f, '\\') < 0 {
		return append(out, f...)
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '\\' || i+1 == len(f) {
			out = append(out, c)
			continue
		}
		i++
		c = f[i]
		if k := strings.IndexByte("bfnrtv", c); k >= 0 {
			out = append(out, "\b\f\n\r\t\v"[k])
			continue
		}
		switch c {
		case 'x':
			v, n := 0, 0
			for n < 2 && i+1 < len(f) && isHex(f[i+1]) {
				i++
				v = v*16 + hexVal(f[i])
				n++
			}
			if n == 0 {
				out = append(out, 'x')
			} else {
				out = append(out, byte(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(c - '0')
			for n := 1; n < 3 && i+1 < len(f) && f[i+1] >= '0' && f[i+1] <= '7'; n++ {
				i++
				v = v*8 + int(f[i]-'0')
			}
			out = append(out, byte(v))
		default:
			out = append(out, c)
		}
	}
	return out
}

// escape encodes v as a COPY text field, appending to out: backslash,
// newline, carriage return and tab are escaped, as COPY TO writes them.
func escape(out, v []byte) []byte {
	clean := 0
	for clean < len(v) && v[clean] != '\\' && v[clean] >= ' ' {
		clean++
	}
	out = append(out, v[:clean]...)
	for _, c := range v[clean:] {
		switch c {
		case '\\':
			out = append(out, '\\', '\\')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, c)
		}
	}
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}
