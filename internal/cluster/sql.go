package cluster

import (
	"strings"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// token is one word of a statement as the globals' classification reads
// it: a keyword or identifier (unquoted ones folded to lower case, as
// PostgreSQL does), a literal's value, or punctuation.
type token struct {
	text    string
	literal bool // a '...' string
	quoted  bool // a "..." identifier
}

// tokensOf reads a statement split by toc.SplitScript, the one splitter
// and tokenizer of pg_dump's and pg_dumpall's SQL, without its ";".
func tokensOf(s toc.Statement) []token {
	toks := s.Tokens
	if n := len(toks); n > 0 && toks[n-1].Kind == toc.Punct && toks[n-1].Text == ";" {
		toks = toks[:n-1]
	}
	out := make([]token, 0, len(toks))
	for _, t := range toks {
		switch t.Kind {
		case toc.Word:
			out = append(out, token{text: strings.ToLower(t.Text)})
		case toc.Quoted:
			out = append(out, token{text: t.Ident(), quoted: true})
		case toc.String:
			out = append(out, token{text: t.Value(), literal: true})
		default:
			out = append(out, token{text: t.Text})
		}
	}
	return out
}

// words says whether ts begins with the keywords ws (unquoted).
func words(ts []token, ws ...string) bool {
	if len(ts) < len(ws) {
		return false
	}
	for i, w := range ws {
		if ts[i].quoted || ts[i].literal || ts[i].text != w {
			return false
		}
	}
	return true
}
