package follow

import (
	"strings"
	"testing"
)

func TestNamesResolve(t *testing.T) {
	for _, tc := range []struct {
		db    string
		in    Names
		want  Names
		fails bool
	}{
		{db: "app", want: Names{Slot: "pgsprint_app", Publication: "pgsprint_app"}},
		{db: "My-DB é", want: Names{Slot: "pgsprint_my_db__", Publication: "pgsprint_my_db__"}},
		{db: "app", in: Names{Slot: "s1", Publication: "Pub One"}, want: Names{Slot: "s1", Publication: "Pub One"}},
		{db: "app", in: Names{Slot: "Bad-Slot"}, fails: true},
		{db: string(make([]byte, 100)), want: Names{Slot: "pgsprint_" + strings.Repeat("_", 54), Publication: "pgsprint_" + strings.Repeat("_", 54)}},
	} {
		got, err := tc.in.Resolve(tc.db)
		if (err != nil) != tc.fails {
			t.Errorf("Resolve(%q, %+v): error %v", tc.db, tc.in, err)
			continue
		}
		if !tc.fails && got != tc.want {
			t.Errorf("Resolve(%q, %+v) = %+v, want %+v", tc.db, tc.in, got, tc.want)
		}
	}
}

// TestFindApplyError: the error quoted is the subscription's own (the
// apply's CONTEXT names its origin), not another subscription's logged
// later on the same target; an error with no CONTEXT that ended a worker
// is quoted when the subscription has none of its own.
func TestFindApplyError(t *testing.T) {
	const (
		own = `2026-11-27 00:10:00.000 UTC [101] ERROR:  duplicate key value violates unique constraint "keyed_pkey"
2026-11-27 00:10:00.000 UTC [101] DETAIL:  Key (id)=(5000) already exists.
2026-11-27 00:10:00.000 UTC [101] CONTEXT:  processing remote data for replication origin "pg_16400" during message type "INSERT" for replication target relation "public.keyed" in transaction 750, finished at 0/1A2B3C8
2026-11-27 00:10:00.001 UTC [90] LOG:  background worker "logical replication apply worker" (PID 101) exited with exit code 1
`
		other = `2026-11-27 00:10:01.000 UTC [102] ERROR:  logical replication target relation "public.t" is missing replicated column: "c"
2026-11-27 00:10:01.000 UTC [102] CONTEXT:  processing remote data for replication origin "pg_16500" during "INSERT" for replication target relation "public.t" in transaction 760 finished at 0/1A2B400
2026-11-27 00:10:01.001 UTC [90] LOG:  background worker "logical replication worker" (PID 102) exited with exit code 1
`
		bare = `2026-11-27 00:10:02.000 UTC [103] ERROR:  could not connect to the publisher: connection refused
2026-11-27 00:10:02.001 UTC [90] LOG:  background worker "logical replication apply worker" (PID 103) exited with exit code 1
`
		noise = "2026-11-27 00:10:03.000 UTC [104] ERROR:  relation \"nope\" does not exist at character 15\n2026-11-27 00:10:03.000 UTC [104] STATEMENT:  SELECT * FROM nope\n"
	)
	for _, tc := range []struct {
		name, log, origin, want string
	}{
		{"own", own, "pg_16400", `duplicate key value violates unique constraint "keyed_pkey"`},
		{"own before another's", own + other + noise, "pg_16400", `duplicate key value violates unique constraint "keyed_pkey"`},
		{"another's only", other, "pg_16400", ""},
		{"no context", other + bare + noise, "pg_16400", "could not connect to the publisher: connection refused"},
		{"own over no context", own + bare, "pg_16400", `duplicate key value violates unique constraint "keyed_pkey"`},
		{"no apply error", noise, "pg_16400", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := findApplyError(tc.log, tc.origin); got != tc.want {
				t.Errorf("findApplyError: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestApplyErrorAdvice: every apply error gets an action, and the ones
// that can be cleared on the target say how.
func TestApplyErrorAdvice(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{`duplicate key value violates unique constraint "keyed_pkey"`, "delete that row on the target"},
		{`could not connect to the publisher: connection to server at "127.0.0.1", port 5432 failed`, "the source's pg_hba.conf"},
		{`permission denied for table keyed`, "grant it the right named"},
		{`CREATE INDEX CONCURRENTLY cannot run inside a transaction block`, "pgsprint follow abort, then clone again"},
		{`index "dup_k" does not exist`, "pgsprint follow abort, then clone again"},
		{`logical replication target relation "public.fresh" is missing replicated column: "c"`, "pgsprint follow abort, then clone again"},
		{"", "pgsprint follow abort, then clone again"},
	} {
		if got := ApplyErrorAdvice(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("ApplyErrorAdvice(%q) = %q, want %q in it", tc.err, got, tc.want)
		}
	}
}
