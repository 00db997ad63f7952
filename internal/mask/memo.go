package mask

// memo remembers what a masked column's recent values became, as the
// COPY text written for them, so that a value seen again costs a map probe
// instead of the keyed hash (about 200 ns) and its unescape and escape.
// Masking targets often repeat (first names, cities, statuses); where a
// column's values seldom repeat (e-mails, phone numbers), the memo turns
// itself off after a window of lookups and costs nothing more. Every rule
// is a function of the value alone, so a remembered output is exactly
// what the rule would write again.
type memo struct {
	seen map[string]string // raw COPY text of a value -> the COPY text written for it
	// tries and hits count the lookups of the current window.
	tries, hits int
	off         bool
}

const (
	memoSize    = 4096  // values remembered per column and chunk
	memoMaxLen  = 256   // the longest value remembered (COPY text bytes): a memo holds at most about 2 MB
	memoWindow  = 16384 // lookups between two checks of the hit rate
	memoMinHits = memoWindow / 8
)

// get returns what raw was written as, if remembered.
func (m *memo) get(raw []byte) (string, bool) {
	if m.off || len(raw) > memoMaxLen {
		return "", false
	}
	m.tries++
	if m.tries == memoWindow {
		if m.hits < memoMinHits {
			m.off, m.seen = true, nil
			return "", false
		}
		m.tries, m.hits = 0, 0
	}
	out, ok := m.seen[string(raw)]
	if ok {
		m.hits++
	}
	return out, ok
}

// put remembers that raw was written as out, while there is room.
func (m *memo) put(raw, out []byte) {
	if m.off || len(raw) > memoMaxLen || len(out) > 2*memoMaxLen {
		return
	}
	if m.seen == nil {
		m.seen = make(map[string]string, 256)
	}
	if len(m.seen) < memoSize {
		m.seen[string(raw)] = string(out)
	}
}
