package main

import (
	"strings"
	"testing"
)

// TestCorpus: the corpus is big enough, holds every class, and each
// entry's placeholders expand.
func TestCorpus(t *testing.T) {
	count := map[class]int{}
	for _, e := range corpus {
		count[e.class]++
		for _, q := range append(append(append([]string{}, e.pre...), e.stmt), e.post...) {
			if s := expand(q, 12); strings.Contains(s, "{n}") || strings.Contains(s, "{k0}") || strings.Contains(s, "{k1}") {
				t.Errorf("not expanded: %s", s)
			}
		}
	}
	if len(corpus) < 60 {
		t.Errorf("corpus has %d entries, want at least 60", len(corpus))
	}
	for _, c := range []class{replayed, stopped, either} {
		if count[c] == 0 {
			t.Errorf("no %s entry", c)
		}
	}
	t.Logf("%d entries: %v", len(corpus), count)
}
