package restore

import (
	"fmt"
	"testing"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// TestReadErrors reads pg_restore --verbose's standard error as
// PostgreSQL 18's pg_restore writes it: each error goes to the entry the
// last "from TOC entry" line named, until another line of pg_restore's
// says it moved on; DETAIL joins the message, the command is kept apart.
func TestReadErrors(t *testing.T) {
	stderr := `pg_restore: creating COLLATION "public.icu_und"
pg_restore: from TOC entry 215; 3456 16390 COLLATION icu_und postgres
pg_restore: error: could not execute query: ERROR:  ICU is not supported in this build
Command was: CREATE COLLATION public.icu_und (provider = icu, locale = 'und');
pg_restore: creating TABLE "app.owned"
pg_restore: from TOC entry 220; 1259 16400 TABLE owned kg_owner
pg_restore: error: could not execute query: ERROR:  role "kg_owner" does not exist
Command was: ALTER TABLE app.owned OWNER TO kg_owner;

pg_restore: creating TABLE "app.packed"
pg_restore: from TOC entry 221; 1259 16410 TABLE packed postgres
pg_restore: error: could not execute query: ERROR:  compression method lz4 not supported
DETAIL:  This functionality requires the server to be built with lz4 support.
Command was: CREATE TABLE app.packed (
    id integer NOT NULL
);
pg_restore: creating TABLE "app.placed"
pg_restore: from TOC entry 222; 1259 16420 TABLE placed postgres
pg_restore: error: could not set "default_tablespace" to kg_space: ERROR:  invalid value for parameter "default_tablespace": "kg_space"
DETAIL:  Tablespace "kg_space" does not exist.
pg_restore: warning: errors ignored on restore: 4
`
	got := readErrors([]byte(stderr))
	want := map[int]struct {
		msg     string
		partial bool
	}{
		215: {"ICU is not supported in this build", false},
		220: {`role "kg_owner" does not exist`, true},
		221: {"compression method lz4 not supported (This functionality requires the server to be built with lz4 support.)", false},
		222: {`could not set "default_tablespace" to kg_space: ERROR:  invalid value for parameter "default_tablespace": "kg_space" (Tablespace "kg_space" does not exist.)`, true},
	}
	if len(got) != len(want) {
		t.Fatalf("errors of %d entries, want %d: %+v", len(got), len(want), got)
	}
	for id, w := range want {
		es := got[id]
		if len(es) != 1 || es[0].msg != w.msg || es[0].partial() != w.partial {
			t.Errorf("entry %d: %+v (partial %v), want %q partial %v", id, es, len(es) == 1 && es[0].partial(), w.msg, w.partial)
		}
	}
}

// TestClassify fails a collation and a table: what depends on either,
// directly or not, is skipped under the first failure it depends on, and
// a failed entry that depends on another failed one is skipped, not a
// failure of its own.
func TestClassify(t *testing.T) {
	entries := []toc.Entry{
		{ID: 1, Type: "COLLATION", Name: "icu"},
		{ID: 2, Type: "TABLE", Name: "sorted", Deps: []int{1}},
		{ID: 3, Type: "VIEW", Name: "v", Deps: []int{2}},
		{ID: 4, Type: "TABLE", Name: "plain"},
		{ID: 5, Type: "FK CONSTRAINT", Name: "fk", Deps: []int{4, 2}},
		{ID: 6, Type: "TABLE", Name: "packed"},
		{ID: 7, Type: "CONSTRAINT", Name: "packed_pkey", Deps: []int{6}},
	}
	k := &keepGoing{entries: map[int]*toc.Entry{}, users: map[int][]int{}, failed: map[int]string{1: "no ICU", 2: "no collation", 3: "no table", 6: "no lz4"},
		skipped: map[int]int{}, kept: map[int]string{}}
	for i := range entries {
		e := &entries[i]
		k.order = append(k.order, e.ID)
		k.entries[e.ID] = e
		for _, d := range e.Deps {
			k.users[d] = append(k.users[d], e.ID)
		}
	}
	k.classify()
	if got := fmt.Sprint(k.failed); got != "map[1:no ICU 6:no lz4]" {
		t.Errorf("failed %s, want the collation and the table of its own", got)
	}
	if got := fmt.Sprint(k.skipped); got != "map[2:1 3:1 5:1 7:6]" {
		t.Errorf("skipped %s, want the table, view and foreign key under the collation, the constraint under the table", got)
	}
	if k.missing(4) {
		t.Errorf("the plain table is reported missing")
	}
}
