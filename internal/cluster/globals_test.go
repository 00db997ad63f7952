package cluster

import (
	"reflect"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// globalsScript is pg_dumpall --globals-only's shape (PostgreSQL 15-18),
// with what a splitter can get wrong: a comment whose literal holds a
// newline, a ";" and doubled quotes, quoted names, meta-commands.
const globalsScript = `--
-- PostgreSQL database cluster dump
--

\restrict abc123

SET default_transaction_read_only = off;

SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;

CREATE ROLE alice;
ALTER ROLE alice WITH NOSUPERUSER INHERIT LOGIN PASSWORD 'SCRAM-SHA-256$4096:x==$y=:z=';
COMMENT ON ROLE alice IS 'multi
line; ''quoted''';
CREATE ROLE "Mixed Case";
ALTER ROLE "Mixed Case" WITH NOLOGIN;
ALTER ROLE alice SET work_mem TO '8MB';
GRANT "Mixed Case" TO alice WITH ADMIN OPTION GRANTED BY postgres;
CREATE TABLESPACE space1 OWNER alice LOCATION '/srv/it''s';
GRANT ALL ON TABLESPACE space1 TO "Mixed Case";
COMMENT ON TABLESPACE space1 IS E'a\'b';

\unrestrict abc123
`

func TestGlobalsParse(t *testing.T) {
	stmts, err := parseGlobals(globalsScript)
	if err != nil {
		t.Fatal(err)
	}
	type about struct {
		role, tablespace   string
		createRole, create bool
		privilege          bool
	}
	var got []about
	for _, g := range stmts {
		got = append(got, about{g.role, g.tablespace, g.createRole, g.create != nil, g.privilege})
	}
	want := []about{
		{}, {}, {}, // SET
		{role: "alice", createRole: true},
		{role: "alice"},
		{role: "alice"},
		{role: "Mixed Case", createRole: true},
		{role: "Mixed Case"},
		{role: "alice"},
		{}, // membership: always granted
		{tablespace: "space1", create: true},
		{tablespace: "space1", privilege: true},
		{tablespace: "space1"},
	}
	if !reflect.DeepEqual(got, want) {
		for i, s := range stmts {
			t.Logf("%d: %q", i, s.sql)
		}
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if s := stmts[5].sql; s != "COMMENT ON ROLE alice IS 'multi\nline; ''quoted'''" {
		t.Errorf("comment statement cut wrong: %q", s)
	}
	if d := stmts[10].create; d.owner != "alice" || d.location != "/srv/it's" {
		t.Errorf("tablespace read as %+v", d)
	}
	roles, spaces, err := GlobalsObjects(globalsScript)
	if err != nil || !reflect.DeepEqual(roles, []string{"alice", "Mixed Case"}) || !reflect.DeepEqual(spaces, []string{"space1"}) {
		t.Errorf("GlobalsObjects = %q, %q, %v", roles, spaces, err)
	}
}

func TestChooseDatabases(t *testing.T) {
	all := []database{
		{name: "app", allowConn: true}, {name: "noconn"}, {name: "postgres", allowConn: true},
		{name: "scratch1", allowConn: true}, {name: "Scratch2", allowConn: true}, {name: "template0", template: true}, {name: "template1", allowConn: true, template: true},
	}
	keep, skipped, err := chooseDatabases(all, []string{"scratch*"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range keep {
		names = append(names, d.name)
	}
	if !reflect.DeepEqual(names, []string{"app", "postgres", "Scratch2"}) {
		t.Errorf("kept %q (an unquoted pattern folds to lower case, as pg_dumpall's)", names)
	}
	want := []archive.SkippedDatabase{{Name: "noconn", Reason: "does not allow connections"}, {Name: "scratch1", Reason: "--exclude-database"},
		{Name: "template0", Reason: "template"}, {Name: "template1", Reason: "template"}}
	if !reflect.DeepEqual(skipped, want) {
		t.Errorf("skipped %+v", skipped)
	}
}

func TestJobsFor(t *testing.T) {
	for _, tc := range []struct {
		size, total int64
		jobs, want  int
	}{
		{0, 0, 4, 1}, {1, 1000, 4, 1}, {1000, 1000, 4, 4}, {500, 1000, 4, 2}, {990, 1000, 2, 2}, {10, 1000, 8, 1},
	} {
		if got := jobsFor(tc.size, tc.total, tc.jobs); got != tc.want {
			t.Errorf("jobsFor(%d, %d, %d) = %d, want %d", tc.size, tc.total, tc.jobs, got, tc.want)
		}
	}
}

func TestGlobalsRedact(t *testing.T) {
	for in, want := range map[string]string{
		"ALTER ROLE a WITH LOGIN PASSWORD 'SCRAM-SHA-256$4096:x'":   "ALTER ROLE a WITH LOGIN PASSWORD ...",
		"ALTER ROLE a WITH LOGIN password 'md5abc' VALID UNTIL 'x'": "ALTER ROLE a WITH LOGIN PASSWORD ...",
		"GRANT r TO a": "GRANT r TO a",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
