package mask

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"time"
	"unicode/utf8"
)

// class is what a column's type lets a rule write into it.
type class int

const (
	classOther class = iota
	classText        // string types (text, varchar, char, citext, name; domains over them)
	classUUID
	classInt2
	classInt4
	classInt8
	classNumeric // numeric, float4, float8
	classDate    // date, timestamp, timestamptz
)

// keyer computes the keyed hashes of one writer's values: an HMAC-SHA256
// keyed with the secret (crypto/hmac, reset for each value), so one
// writer (one worker's chunk) allocates it once.
type keyer struct {
	h   hash.Hash
	in  []byte // kind || 0 || value, written to h at once
	sum []byte
}

func newKeyer(secret []byte) *keyer {
	return &keyer{h: hmac.New(sha256.New, secret), sum: make([]byte, 0, sha256.Size)}
}

// mac is HMAC(secret, kind || 0 || value): the kind keeps one rule's
// output from telling another's (email and hash of one value differ).
func (k *keyer) mac(kind string, v []byte) []byte {
	k.in = append(append(append(k.in[:0], kind...), 0), v...)
	k.h.Reset()
	k.h.Write(k.in)
	k.sum = k.h.Sum(k.sum[:0])
	return k.sum
}

// column is one masked column of a table being read: where it is in the
// COPY row, and how its values are replaced.
type column struct {
	index int
	rule  Rule
	class class
	limit int  // varchar(n)/char(n): at most n characters; 0 none
	utf8  bool // the data's encoding is UTF8 (characters are runes), else one byte each
}

// apply returns the masked value of v (unescaped COPY text, never NULL),
// appended to out, or null.
func (c *column) apply(k *keyer, v, out []byte) ([]byte, bool) {
	r := &c.rule
	start := len(out)
	switch r.Kind {
	case Null:
		return out, true
	case Const:
		out = append(out, r.Value...)
	case Regex:
		out = append(out, r.re.ReplaceAll(v, r.repl)...)
	case Email:
		m := k.mac(Email, v)
		out = appendLower(out, pick(firstNames, m[0:2]))
		out = append(out, '.')
		out = appendLower(out, pick(lastNames, m[2:4]))
		out = append(out, '.')
		out = hex.AppendEncode(out, m[4:12])
		out = append(out, "@example.com"...)
	case Name:
		m := k.mac(Name, v)
		out = append(out, pick(firstNames, m[0:2])...)
		out = append(out, ' ')
		out = append(out, pick(lastNames, m[2:4])...)
	case Phone:
		m := k.mac(Phone, v)
		n := binary.BigEndian.Uint64(m) % 10000000
		out = append(out, "+1-555-"...)
		var buf [8]byte
		d := strconv.AppendUint(buf[:0], n+10000000, 10)[1:] // seven digits, leading zeros
		out = append(out, d[:3]...)
		out = append(out, '-')
		out = append(out, d[3:]...)
	case Text:
		out = appendText(out, k.mac(Text, v), c.chars(v))
	case Number:
		m := k.mac(Number, v)
		span := uint64(r.Max-r.Min) + 1
		out = strconv.AppendInt(out, r.Min+int64(binary.BigEndian.Uint64(m)%span), 10)
	case DateDays:
		return shiftDate(out, v, k.mac(DateDays, v), r.Days), false
	case Hash:
		m := k.mac(Hash, v)
		switch c.class {
		case classUUID:
			x := hex.EncodeToString(m[:16])
			out = append(out, x[0:8]+"-"+x[8:12]+"-"+x[12:16]+"-"+x[16:20]+"-"+x[20:32]...)
		case classInt8, classNumeric:
			out = strconv.AppendUint(out, binary.BigEndian.Uint64(m)>>1, 10)
		default:
			out = append(out, hex.EncodeToString(m)[:r.Hex]...)
		}
	}
	if c.limit > 0 {
		out = out[:start+c.cut(out[start:], c.limit)]
	}
	return out, false
}

// chars is v's length in characters: runes in UTF8, else bytes.
func (c *column) chars(v []byte) int {
	if c.utf8 {
		return utf8.RuneCount(v)
	}
	return len(v)
}

// cut is how many bytes of b hold its first n characters.
func (c *column) cut(b []byte, n int) int {
	if !c.utf8 {
		return min(n, len(b))
	}
	i := 0
	for ; n > 0 && i < len(b); n-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}

// pick is an entry of list chosen by two bytes of a keyed hash.
func pick(list []string, b []byte) string {
	return list[int(binary.BigEndian.Uint16(b))%len(list)]
}

func appendLower(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return out
}

// appendText appends words chosen by seed (rehashed with SHA-256 when its
// bytes run out), separated by spaces, n characters in all: text of the
// value's length, so that a length limit and the shape of the data hold.
func appendText(out, seed []byte, n int) []byte {
	if n <= 0 {
		return out
	}
	s := append([]byte(nil), seed...)
	i, written := 0, 0
	for written < n {
		if i+2 > len(s) {
			sum := sha256.Sum256(s)
			s, i = sum[:], 0
		}
		w := pick(words, s[i:i+2])
		i += 2
		if written > 0 {
			out = append(out, ' ')
			written++
			if written == n {
				break
			}
		}
		w = w[:min(len(w), n-written)]
		out = append(out, w...)
		written += len(w)
	}
	return out
}

// shiftDate moves the date at the start of v (as DateStyle ISO prints
// date, timestamp and timestamptz: Y...Y-MM-DD, four or more year digits,
// then the time and zone, then " BC" for years before 1) by a keyed
// number of days in [-days, days], keeping the rest as it is. BC dates
// and years past 9999 are shifted too; a shift that would leave
// PostgreSQL's range (4714-11-24 BC to 5874897-12-31 for a date,
// 294276-12-31 for a timestamp) goes the other way. infinity and
// -infinity, which are no dates, stay.
func shiftDate(out, v, m []byte, days int64) []byte {
	year, month, day, rest, bc, ok := splitISODate(v)
	if !ok {
		return append(out, v...)
	}
	if bc {
		year = 1 - year // astronomical: 1 BC is year 0
	}
	shift := int(int64(binary.BigEndian.Uint64(m)%uint64(2*days+1)) - days)
	d := time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC)
	maxYear := 5874897
	if len(rest) > 0 {
		maxYear = 294276 // a timestamp
	}
	inRange := func(t time.Time) bool {
		lo := time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
		hi := time.Date(maxYear, 12, 31, 0, 0, 0, 0, time.UTC)
		return !t.Before(lo) && !t.After(hi)
	}
	shifted := d.AddDate(0, 0, shift)
	if !inRange(shifted) {
		shifted = d.AddDate(0, 0, -shift)
	}
	y := shifted.Year()
	bc = y <= 0
	if bc {
		y = 1 - y
	}
	out = fmt.Appendf(out, "%04d-%02d-%02d", y, int(shifted.Month()), shifted.Day())
	out = append(out, rest...)
	if bc {
		out = append(out, " BC"...)
	}
	return out
}

// splitISODate reads the date at the start of v: its year as printed
// (before " BC"), month, day, what follows the date (time, zone; without
// " BC") and whether it is BC.
func splitISODate(v []byte) (year, month, day int, rest []byte, bc, ok bool) {
	if bc = hasBC(v); bc {
		v = v[:len(v)-3]
	}
	i := 0
	for i < len(v) && i < 8 && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i < 4 || len(v) < i+6 || v[i] != '-' || v[i+3] != '-' || (len(v) > i+6 && v[i+6] != ' ') {
		return 0, 0, 0, nil, false, false
	}
	var err error
	if year, err = strconv.Atoi(string(v[:i])); err != nil {
		return 0, 0, 0, nil, false, false
	}
	month, err1 := strconv.Atoi(string(v[i+1 : i+3]))
	day, err2 := strconv.Atoi(string(v[i+4 : i+6]))
	if err1 != nil || err2 != nil || month < 1 || month > 12 || day < 1 || day > 31 || (bc && year < 1) {
		return 0, 0, 0, nil, false, false
	}
	return year, month, day, v[i+6:], bc, true
}

func hasBC(v []byte) bool {
	return len(v) >= 3 && string(v[len(v)-3:]) == " BC"
}
