package pgtest

// The canaries of the masking leak tests (the binary's and clone's):
// values planted in masked columns of every kind, and a scan for them in
// any encoding in whatever a masked run wrote or left.

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// LeakRules mask every canary column of canaries.sql: text, an integer
// key and the foreign key on it, a uuid key, a jsonb, and a column of a
// partitioned table (its partitions' rows).
const LeakRules = `leak.acct.id = hash
leak.acct.email = email
leak.acct.note = const:{"masked": true}
leak.ref.acct_id = hash
leak.dev.id = hash
leak.ev.email = text
`

// Canaries are the planted values of one run, drawn from a seed: every
// text canary holds mark, every integer key is intHigh<<24 plus a small
// number (so its binary forms share five bytes), every uuid key starts
// with uuidPrefix.
type Canaries struct {
	mark       string // the text every text canary holds
	intHigh    uint64
	uuidPrefix [6]byte
	ints       map[uint64]bool
	rows       int
}

// NewCanaries draws the canaries of one run from seed.
func NewCanaries(seed uint64) *Canaries {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := &Canaries{intHigh: 1<<36 + rng.Uint64N(1<<37), ints: map[uint64]bool{}, rows: 3000}
	var b strings.Builder
	b.WriteString("Cnry")
	for range 10 {
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	c.mark = b.String()
	for i := range c.uuidPrefix {
		c.uuidPrefix[i] = byte(rng.Uint32())
	}
	c.uuidPrefix[0] |= 0x80 // no leading zero byte to blur the prefix
	for i := range c.rows {
		c.ints[c.id(i)] = true
	}
	return c
}

// id is the integer key of row i.
func (c *Canaries) id(i int) uint64 { return c.intHigh<<24 | uint64(i)<<8 | 0x5a }

// SQL creates schema leak with the canaries and analyzes it, so that the
// source's statistics hold them.
func (c *Canaries) SQL() string {
	var ids strings.Builder
	for i := range c.rows {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(strconv.FormatUint(c.id(i), 10))
	}
	u := fmt.Sprintf("%x", c.uuidPrefix[:])
	return fmt.Sprintf(`
CREATE SCHEMA leak;
CREATE TABLE leak.acct (id int8 PRIMARY KEY, email text NOT NULL UNIQUE, note jsonb, pad text);
CREATE TABLE leak.ref (id int4 PRIMARY KEY, acct_id int8 REFERENCES leak.acct (id), pad text);
CREATE TABLE leak.dev (id uuid PRIMARY KEY, label text);
CREATE TABLE leak.ev (id int, at date, email text) PARTITION BY RANGE (at);
CREATE TABLE leak.ev_1 PARTITION OF leak.ev FOR VALUES FROM ('2020-01-01') TO ('2025-01-01');
CREATE TABLE leak.ev_2 PARTITION OF leak.ev FOR VALUES FROM ('2025-01-01') TO ('2030-01-01');
INSERT INTO leak.acct SELECT id, '%[1]s' || n || '@canary.test', jsonb_build_object('secret', '%[1]s-' || n), repeat('p', 60)
	FROM unnest('{%[2]s}'::int8[]) WITH ORDINALITY AS u(id, n);
INSERT INTO leak.ref SELECT n, id, repeat('r', 40) FROM unnest('{%[2]s}'::int8[]) WITH ORDINALITY AS u(id, n);
INSERT INTO leak.dev SELECT (substr('%[3]s', 1, 8) || '-' || substr('%[3]s', 9, 4) || '-4' || lpad(to_hex(g %% 4096), 3, '0') || '-8' || substr(md5(g::text), 1, 3) || '-' || substr(md5(g::text), 4, 12))::uuid, 'x'
	FROM generate_series(1, %[4]d) g;
INSERT INTO leak.ev SELECT g, date '2021-01-01' + g, '%[1]sev' || g FROM generate_series(1, %[4]d) g;
ANALYZE;
`, c.mark, ids.String(), u, c.rows)
}

// Find describes every canary in data, in any of the encodings it looks
// for; nil when there is none.
func (c *Canaries) Find(data []byte) []string {
	var found []string
	s := string(data)
	lower := strings.ToLower(s)
	for _, p := range c.patterns() {
		hay := s
		if p.fold {
			hay = lower
		}
		if i := strings.Index(hay, p.s); i >= 0 {
			found = append(found, fmt.Sprintf("canary (%s) at byte %d: %q", p.what, i, excerpt(s, i)))
		}
	}
	// Integer keys in decimal: every run of digits that is one.
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if v, err := strconv.ParseUint(s[i:j], 10, 64); err == nil && c.ints[v] {
			found = append(found, fmt.Sprintf("canary integer key %d at byte %d: %q", v, i, excerpt(s, i)))
			if len(found) >= 3 {
				return found
			}
		}
		i = j
	}
	return found
}

// pattern is one encoding of a canary's shared part.
type pattern struct {
	what, s string
	fold    bool // matched case-insensitively (hex)
}

// patterns are the shared parts of the canaries in each encoding: the
// text mark plain, in hex and in base64 (at each of the three byte
// alignments); the integer keys' five high bytes big- and little-endian,
// and in hex; the uuid prefix as text, hex and bytes.
func (c *Canaries) patterns() []pattern {
	ps := []pattern{
		{"text", c.mark, false},
		{"text as hex", fmt.Sprintf("%x", c.mark), true},
	}
	for a := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", a) + c.mark))
		start, end := (8*a+5)/6, 8*(a+len(c.mark))/6
		ps = append(ps, pattern{fmt.Sprintf("text as base64, offset %d", a), enc[start:end], false})
	}
	var be [8]byte
	for i := range be {
		be[i] = byte(c.intHigh << 24 >> (56 - 8*i))
	}
	le := slices.Clone(be[:])
	slices.Reverse(le)
	ps = append(ps,
		pattern{"integer key, big-endian", string(be[:5]), false},
		pattern{"integer key, little-endian", string(le[3:]), false},
		pattern{"integer key as hex", fmt.Sprintf("%x", be[:5]), true},
		pattern{"uuid key", fmt.Sprintf("%x-%x", c.uuidPrefix[:4], c.uuidPrefix[4:]), true},
		pattern{"uuid key as hex", fmt.Sprintf("%x", c.uuidPrefix[:]), true},
		pattern{"uuid key, binary", string(c.uuidPrefix[:]), false},
	)
	return ps
}

// Mark is the text every text canary holds.
func (c *Canaries) Mark() string { return c.mark }

// excerpt is up to 40 bytes of s either side of i.
func excerpt(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}
