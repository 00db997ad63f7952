package preflight

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestChecklists runs Dump, Restore and Clone against a server of its own
// (wal_level at its default, replica; a REPLICATION role that is no
// superuser), each case in databases of its own, and asserts one line of
// the checklist: its verdict (✓ passed, ! warning, ✗ failed) and a part of
// what it says. Each verdict is the one the run would give: the checks
// are the stages' own functions.
func TestChecklists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.Exec(ctx, "postgres", "CREATE ROLE replicator LOGIN REPLICATION"); err != nil {
		t.Fatal(err)
	}
	config := func(t *testing.T, db, user string) *pgx.ConnConfig {
		t.Helper()
		cfg, err := pgx.ParseConfig(pgtest.KeywordConnString(map[string]string{"host": c.SocketDir(), "port": strconv.Itoa(c.Port()), "user": user, "dbname": db}))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const keyless = "CREATE TABLE plain (id int, note text); CREATE TABLE keyed (id int PRIMARY KEY)"
	cases := []struct {
		name string
		// setup runs in the case's source database (<name>_s), and target
		// in its target database (<name>_t); a clone's source and
		// target, a dump's source, a restore's target.
		setup, target string
		run           func(t *testing.T, src, dst *pgx.ConnConfig) *Checklist
		item, verdict string // the line's name, and ✓, ! or ✗
		says          string // what it says (a part of it)
	}{
		{name: "dump_ready", setup: keyless, run: dumpRun(ctx, func(*DumpOptions) {}),
			item: "read privileges", verdict: "✓", says: "2 tables and sequences selected, all readable"},
		{name: "dump_stdout", run: dumpRun(ctx, func(o *DumpOptions) { o.File = "-" }),
			item: "output", verdict: "✓", says: "standard output"},
		{name: "dump_snapshot", run: dumpRun(ctx, func(o *DumpOptions) { o.Snapshot = "00000003-00000002-1" }),
			item: "snapshot", verdict: "✗", says: "is the process that exported it (pgsprint snapshot) still running?"},
		{name: "dump_jobs", run: dumpRun(ctx, func(o *DumpOptions) { o.Jobs = 5000 }),
			item: "connections on the source", verdict: "✗", says: "5001"},
		{name: "restore_unreadable", run: func(t *testing.T, _, dst *pgx.ConnConfig) *Checklist {
			return Restore(ctx, RestoreOptions{Options: restore.Options{Target: dst, Jobs: 1, Programs: &pgbin.Finder{}}, ArchiveErr: errors.New("open x.pgs: no such file")})
		}, item: "archive", verdict: "✗", says: "open x.pgs: no such file: check -f"},
		{name: "restore_stdin", run: func(t *testing.T, _, dst *pgx.ConnConfig) *Checklist {
			return Restore(ctx, RestoreOptions{Options: restore.Options{Target: dst, Jobs: 1, Programs: &pgbin.Finder{}}, SpillDir: t.TempDir()})
		}, item: "archive", verdict: "✓", says: "standard input: read only by the restore itself"},
		{name: "clone_same", run: func(t *testing.T, src, _ *pgx.ConnConfig) *Checklist {
			return Clone(ctx, cloneOptions(src, src, nil))
		}, item: "distinct databases", verdict: "✗", says: "--source and --target are the same database"},
		{name: "clone_empty", setup: keyless, run: cloneRun(ctx, nil),
			item: "target database", verdict: "✓", says: `"clone_empty_t" is empty`},
		{name: "clone_not_empty", setup: keyless, target: "CREATE TABLE there (id int)", run: cloneRun(ctx, nil),
			item: "target database", verdict: "✗", says: `target database "clone_not_empty_t" is not empty: it holds`},
		{name: "follow_wal_level", setup: keyless, run: cloneRun(ctx, &FollowOptions{Slot: "s", Publication: "p"}),
			item: "follow: wal_level", verdict: "✗", says: "--follow needs logical"},
		{name: "follow_keyless", setup: keyless, run: cloneRun(ctx, &FollowOptions{Slot: "s", Publication: "p"}),
			item: "follow: replica identity", verdict: "✗", says: "source tables without primary key or replica identity (public.plain)"},
		{name: "follow_keyless_full", setup: keyless, run: cloneRun(ctx, &FollowOptions{Slot: "s", Publication: "p", ReplicaIdentityFull: true}),
			item: "follow: replica identity", verdict: "✓", says: "2 tables"},
		{name: "follow_slot_free", setup: keyless, run: cloneRun(ctx, &FollowOptions{Slot: "free_slot", Publication: "p"}),
			item: "follow: slot name", verdict: "✓", says: "free_slot is free"},
		{name: "follow_no_superuser", run: func(t *testing.T, src, dst *pgx.ConnConfig) *Checklist {
			src.User = "replicator"
			return Clone(ctx, cloneOptions(src, dst, &FollowOptions{Slot: "s", Publication: "p"}))
		}, item: "follow: DDL capture (source)", verdict: "!", says: "not a superuser"},
		{name: "follow_conninfo", run: cloneRun(ctx, &FollowOptions{Slot: "s", Publication: "p", ConninfoErr: errors.New("no password here")}),
			item: "follow: source reach", verdict: "✗", says: "no password here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for db, sql := range map[string]string{tc.name + "_s": tc.setup, tc.name + "_t": tc.target} {
				if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+db); err != nil {
					t.Fatal(err)
				}
				if sql == "" {
					continue
				}
				if err := c.Exec(ctx, db, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			cl := tc.run(t, config(t, tc.name+"_s", "postgres"), config(t, tc.name+"_t", "postgres"))
			var out strings.Builder
			if err := cl.Print(&out); err != nil {
				t.Fatal(err)
			}
			prefix := tc.verdict + " " + tc.item + ": "
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, tc.says) {
					return
				}
			}
			t.Errorf("no line %q…%q in the checklist:\n%s", prefix, tc.says, out.String())
		})
	}
}

// dumpRun is a case's run of Dump on its source, with options a dump of
// one job into a file of the test's gets, changed by set.
func dumpRun(ctx context.Context, set func(*DumpOptions)) func(*testing.T, *pgx.ConnConfig, *pgx.ConnConfig) *Checklist {
	return func(t *testing.T, src, _ *pgx.ConnConfig) *Checklist {
		o := DumpOptions{Options: dump.Options{Source: src, Jobs: 1, File: t.TempDir() + "/x.pgs", Programs: &pgbin.Finder{}}}
		set(&o)
		return Dump(ctx, o)
	}
}

// cloneRun is a case's run of Clone from its source into its target,
// with follow's options when f is set.
func cloneRun(ctx context.Context, f *FollowOptions) func(*testing.T, *pgx.ConnConfig, *pgx.ConnConfig) *Checklist {
	return func(t *testing.T, src, dst *pgx.ConnConfig) *Checklist {
		if f != nil && f.Conninfo == "" && f.ConninfoErr == nil {
			f.ConninfoErr = errors.New("not probed") // the reach probe is the cmd tests'
		}
		return Clone(ctx, cloneOptions(src, dst, f))
	}
}

// cloneOptions are a clone's of one job from src into dst.
func cloneOptions(src, dst *pgx.ConnConfig, f *FollowOptions) CloneOptions {
	return CloneOptions{Options: clone.Options{
		Options: restore.Options{Target: dst, Jobs: 1, Programs: &pgbin.Finder{}},
		Session: dump.SessionOptions{Source: src},
	}, Follow: f}
}
