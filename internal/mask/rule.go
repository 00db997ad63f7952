// Package mask replaces sensitive column values in a development copy
// (dump and clone --mask): rules name a column and how its values are
// replaced; Resolve checks them against the live schema in the dump's
// snapshot (types, keys, foreign keys); Table.Writer rewrites the COPY
// text of a masked table on the data workers, row by row, between the
// server and the archive (or the target).
//
// Every rule but const, null and keep derives its output from
// HMAC-SHA256(secret, rule kind, value): the same value gives the same
// output in every table and every run with the same secret, so joins on
// masked columns still match, and without the secret the output says
// nothing about the value. See docs/ARCHITECTURE.md, "Masking".
package mask

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/listfile"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// The rule kinds, as written after the '=' of a rule.
const (
	Email    = "email"     // first.last.<16 hex>@example.com
	Name     = "name"      // "First Last"
	Phone    = "phone"     // +1-555-NNN-NNNN
	Text     = "text"      // words of as many characters as the value
	Number   = "number"    // number:MIN:MAX, an integer in [MIN, MAX]
	DateDays = "dateshift" // dateshift:DAYS, the date moved by up to DAYS days either way
	Null     = "null"      // NULL
	Const    = "const"     // const:VALUE, VALUE as COPY text would spell it unescaped
	Regex    = "regex"     // regex:/PATTERN/REPLACEMENT/ (any delimiter), Go syntax
	Hash     = "hash"      // hash or hash:N, N hex characters of the keyed hash (text), or a uuid or bigint
	Keep     = "keep"      // left as it is: says in the mask file that a column was looked at
)

// Rule is one --mask 'schema.table.column=RULE'.
type Rule struct {
	Schema, Table, Column string // names as stored (unquoted)
	Kind                  string // one of the kinds above
	Text                  string // the rule after '=', as given (trimmed): recorded in the manifest
	Min, Max              int64  // number
	Days                  int64  // dateshift
	Value                 string // const
	Hex                   int    // hash: hex characters for a text column
	re                    *regexp.Regexp
	repl                  []byte
}

// Name is the rule's column, quoted and qualified, for messages.
func (r Rule) Name() string {
	return pg.Qualified(r.Schema, r.Table) + "." + pg.Ident(r.Column)
}

// Spec is what the user asked for: the rules and the secret that keys them.
type Spec struct {
	Rules  []Rule
	Secret []byte
}

// Active says whether masking was asked for.
func (s Spec) Active() bool { return len(s.Rules) > 0 }

// SecretEnv is the environment variable the secret may come from
// (or --mask-secret-file): never the command line, which ps shows.
const SecretEnv = "PGSPRINT_MASK_SECRET"

// MinSecret is the shortest secret masking takes, in bytes: the masked
// values of a short secret can be recomputed for guessed originals by
// anyone who tries every secret (a 1-character one at once).
const MinSecret = 16

// defaultHex is hash's length on a text column: 128 bits, unique for any
// table that fits in a database.
const defaultHex = 32

// Parse reads "schema.table.column=RULE". Names follow SQL: double quotes
// keep case, dots and '=' ("My"."t"."e=mail"); unquoted names are folded
// to lower case.
func Parse(s string) (Rule, error) {
	r, err := parse(s)
	if err != nil {
		return Rule{}, fmt.Errorf("--mask %q: %w", s, err)
	}
	return r, nil
}

// parse is Parse without the flag's name: a --mask-file's line is no
// --mask.
func parse(s string) (Rule, error) {
	name, rule, ok := pg.CutOutsideQuotes(s, '=')
	if !ok {
		return Rule{}, fmt.Errorf("want 'schema.table.column=RULE'")
	}
	parts, err := splitName(strings.TrimSpace(name))
	if err != nil || len(parts) != 3 {
		return Rule{}, fmt.Errorf("want 'schema.table.column=RULE' (three names)")
	}
	r, err := ParseRule(strings.TrimSpace(rule))
	if err != nil {
		return Rule{}, err
	}
	r.Schema, r.Table, r.Column = parts[0], parts[1], parts[2]
	return r, nil
}

// ParseRule reads the RULE of a --mask: KIND or KIND:ARGUMENTS.
func ParseRule(s string) (Rule, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	r := Rule{Kind: kind, Text: s}
	noArg := func() error {
		if hasArg {
			return fmt.Errorf("rule %s takes no argument", kind)
		}
		return nil
	}
	switch kind {
	case Email, Name, Phone, Text, Null, Keep:
		return r, noArg()
	case Hash:
		r.Hex = defaultHex
		if hasArg {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 8 || n > 64 {
				return r, fmt.Errorf("hash:%s: want hash:N, N hex characters from 8 to 64", arg)
			}
			r.Hex = n
		}
		return r, nil
	case Number:
		lo, hi, ok := strings.Cut(arg, ":")
		var err1, err2 error
		r.Min, err1 = strconv.ParseInt(lo, 10, 64)
		r.Max, err2 = strconv.ParseInt(hi, 10, 64)
		if !hasArg || !ok || err1 != nil || err2 != nil || r.Min > r.Max || r.Max-r.Min < 0 || r.Max-r.Min == 1<<63-1 {
			return r, fmt.Errorf("number:%s: want number:MIN:MAX, integers, MIN <= MAX", arg)
		}
		return r, nil
	case DateDays:
		n, err := strconv.ParseInt(arg, 10, 64)
		if !hasArg || err != nil || n < 1 || n > 36500 {
			return r, fmt.Errorf("dateshift:%s: want dateshift:DAYS, 1 to 36500", arg)
		}
		r.Days = n
		return r, nil
	case Const:
		if !hasArg {
			return r, fmt.Errorf("const: want const:VALUE (const: with nothing after it is the empty string; use null for NULL)")
		}
		r.Value = arg
		return r, nil
	case Regex:
		if len(arg) < 3 {
			return r, fmt.Errorf("regex:%s: want regex:/PATTERN/REPLACEMENT/", arg)
		}
		d := arg[:1]
		parts := strings.Split(arg[1:], d)
		if len(parts) != 3 || parts[2] != "" {
			return r, fmt.Errorf("regex:%s: want regex:/PATTERN/REPLACEMENT/ (any one delimiter, three of it)", arg)
		}
		re, err := regexp.Compile(parts[0])
		if err != nil {
			return r, fmt.Errorf("regex: %w", err)
		}
		r.re, r.repl = re, []byte(parts[1])
		return r, nil
	}
	return r, fmt.Errorf("unknown rule %q (want email, name, phone, text, number:MIN:MAX, dateshift:DAYS, null, const:VALUE, regex:/P/R/, hash[:N] or keep)", kind)
}

// ReadFile reads a --mask-file: one rule a line, "schema.table.column =
// RULE"; blank lines and lines starting with # are skipped. A file under
// version control says what a development copy hides better than a
// command line.
func ReadFile(path string) ([]Rule, error) {
	var rules []Rule
	err := listfile.Lines("--mask-file", path, func(_ int, line string) error {
		r, err := parse(line)
		if err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		rules = append(rules, r)
		return nil
	})
	return rules, err
}

// splitName splits a dotted SQL name into its parts, unquoting quoted ones
// and folding unquoted ones to lower case.
func splitName(s string) ([]string, error) {
	var parts []string
	for {
		var part string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			part, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, '.')
			if end < 0 {
				end = len(s)
			}
			part, s = strings.ToLower(strings.TrimSpace(s[:end])), s[end:]
		}
		if part == "" {
			return nil, fmt.Errorf("empty name")
		}
		parts = append(parts, part)
		if s == "" {
			return parts, nil
		}
		if s[0] != '.' {
			return nil, fmt.Errorf("want a dot after a name")
		}
		s = s[1:]
	}
}

// plain says the rule's output never holds a character COPY text escapes
// (backslash, or a control character): its words, digits and hex are
// written into the row as they are, without a pass of escape.
func (r *Rule) plain() bool {
	switch r.Kind {
	case Email, Name, Phone, Text, Number, Hash:
		return true
	}
	return false
}
