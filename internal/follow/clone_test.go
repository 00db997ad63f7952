package follow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// sourceSQL is every test's source: a keyed table, one without key, an
// unlogged one and a sequence.
const sourceSQL = `CREATE TABLE keyed (id int PRIMARY KEY, v text);
	CREATE TABLE nokey (a int, b text);
	CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY);
	CREATE SEQUENCE ticket;
	INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 2000) i;
	INSERT INTO nokey SELECT i, 'b' || i FROM generate_series(1, 100) i;
	SELECT nextval('ticket') FROM generate_series(1, 7)`

// TestCloneRefused: each unmet requirement is refused before anything is
// created on either side, the copy never runs, and the error names what
// to do.
func TestCloneRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	plain := pgtest.New(t, pgtest.Options{Settings: map[string]string{"wal_level": "minimal", "max_wal_senders": "0", "max_replication_slots": "0"}})
	for _, tc := range []struct {
		name string
		// srcSetup and dstSetup run in the test's databases first.
		srcSetup, dstSetup string
		on                 *pgtest.Instance // the source's and target's cluster: c if nil
		opts               func(o *Options)
		want               []string
		is                 error
	}{
		{name: "wal level", on: plain, opts: func(o *Options) { o.SkipNoKey = true },
			want: []string{"wal_level = minimal", "no free replication slot (0 of max_replication_slots = 0 in use)", "no free WAL sender (0 of max_wal_senders = 0 in use)"}},
		{name: "source role", opts: func(o *Options) { o.Source.User = "weak"; o.SkipNoKey = true },
			want: []string{"neither REPLICATION nor superuser", "may not create a publication"}},
		{name: "target role", opts: func(o *Options) { o.Target.User = "weak"; o.SkipNoKey = true },
			want: []string{"the target role may not create a subscription"}},
		{name: "slot exists", srcSetup: "SELECT pg_create_logical_replication_slot('NAME', 'pgoutput')", opts: func(o *Options) { o.SkipNoKey = true },
			want: []string{"source already has a replication slot pgsprint_dst_"}},
		{name: "publication exists", srcSetup: "CREATE PUBLICATION NAME", opts: func(o *Options) { o.SkipNoKey = true },
			want: []string{"source already has a publication pgsprint_dst_"}},
		{name: "subscription exists", dstSetup: "CREATE SUBSCRIPTION NAME CONNECTION 'dbname=x' PUBLICATION p WITH (connect = false)",
			opts: func(o *Options) { o.SkipNoKey = true }, want: []string{"target already has a subscription pgsprint_dst_"}},
		{name: "keyless", want: []string{"source tables without primary key or replica identity (public.nokey)", "--replica-identity-full"}},
		{name: "no equality operator", srcSetup: "CREATE DOMAIN jd AS json; CREATE TABLE docs (id int, d jd[], p point, v varchar, e int[])",
			opts: func(o *Options) { o.ReplicaIdentityFull = true },
			want: []string{"have no equality operator: public.docs.d (jd[]), public.docs.p (point);", "--follow-skip-no-key"}},
		{name: "already full", srcSetup: "CREATE TABLE docs (id int PRIMARY KEY, d json); ALTER TABLE docs REPLICA IDENTITY FULL",
			opts: func(o *Options) { o.SkipNoKey = true }, want: []string{"have no equality operator: public.docs.d (json);"}},
		{name: "unreachable", opts: func(o *Options) { o.SkipNoKey = true; o.Conninfo = "host=127.0.0.1 port=1 dbname=x password=sekrit" },
			want: []string{"the target server cannot reach the source"}},
		{name: "password", opts: func(o *Options) { o.Source.Password = "pw" }, is: ErrConninfoPassword},
		{name: "nothing selected", opts: func(o *Options) { o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"scratch"}}} },
			want: []string{"no table of the source to follow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			on := c
			if tc.on != nil {
				on = tc.on
			}
			o := newCase(t, on, sourceSQL)
			src, dst, n := o.Source, o.Target, o.Names
			if tc.srcSetup != "" {
				exec(t, src, strings.ReplaceAll(tc.srcSetup, "NAME", n.Slot))
			}
			if tc.dstSetup != "" {
				exec(t, dst, strings.ReplaceAll(tc.dstSetup, "NAME", n.Slot))
			}
			if tc.opts != nil {
				tc.opts(&o)
			}
			_, err := Clone(ctx, o, func(context.Context, string, filter.Options) error {
				t.Error("copy ran despite the refusal")
				return nil
			})
			if err == nil {
				t.Fatal("not refused")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "sekrit") {
				t.Errorf("password printed: %v", err)
			}
			// What existed before stays; nothing else was created.
			slots := query(t, src, "SELECT slot_name::text FROM pg_replication_slots WHERE database = current_database()")
			pubs := query(t, src, "SELECT pubname::text FROM pg_publication")
			subs := query(t, dst, "SELECT subname::text FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
			if want := strings.Contains(tc.srcSetup, "slot"); (len(slots) == 1) != want || len(slots) > 1 {
				t.Errorf("source slots %v", slots)
			}
			if want := strings.Contains(tc.srcSetup, "PUBLICATION"); (len(pubs) == 1) != want || len(pubs) > 1 {
				t.Errorf("source publications %v", pubs)
			}
			if want := tc.dstSetup != ""; (len(subs) == 1) != want || len(subs) > 1 {
				t.Errorf("target subscriptions %v", subs)
			}
			if v := scalar(t, src, "SELECT relreplident::text FROM pg_class WHERE relname = 'nokey'"); v != "d" {
				t.Errorf("nokey's replica identity is %q after a refusal, want d", v)
			}
			if v := scalar(t, dst, "SELECT count(*)::text FROM pg_class WHERE relname = 'keyed'"); v != "0" {
				t.Errorf("the target holds keyed after a refusal")
			}
		})
	}
}

// TestCloneCopyFails: while copy runs, the publication holds the tables
// the options choose and the slot is held with the snapshot copy is
// given; when copy fails, Clone returns its error and the slot, the
// publication and any REPLICA IDENTITY FULL are gone.
func TestCloneCopyFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	for _, tc := range []struct {
		name string
		opts func(o *Options)
		// all: FOR ALL TABLES; else tables are the published ones.
		all      bool
		tables   []string
		identity string // nokey's relreplident while copy runs
	}{
		{name: "whole database", opts: func(o *Options) { o.ReplicaIdentityFull = true }, tables: []string{"keyed", "nokey"}, identity: "f"},
		{name: "skip no key", opts: func(o *Options) { o.SkipNoKey = true }, tables: []string{"keyed"}, identity: "d"},
		{name: "selection", opts: func(o *Options) {
			o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"keyed", "scratch"}}}
		}, tables: []string{"keyed"}, identity: "d"},
		{name: "all tables", all: true, tables: []string{"keyed"}, identity: "d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setup := sourceSQL
			if tc.all { // FOR ALL TABLES needs no keyless and no unlogged table
				setup += "; DROP TABLE nokey, scratch"
			}
			o := newCase(t, c, setup)
			src, dst, n := o.Source, o.Target, o.Names
			if tc.opts != nil {
				tc.opts(&o)
			}
			failed := errors.New("copy failed")
			ran := false
			_, err := Clone(ctx, o, func(ctx context.Context, snapshot string, f filter.Options) error {
				ran = true
				if v := scalar(t, src, "SELECT plugin::text || ' ' || slot_type FROM pg_replication_slots WHERE slot_name = $1", n.Slot); v != "pgoutput logical" {
					t.Errorf("slot %s while copying: %q, want pgoutput logical", n.Slot, v)
				}
				// The replication connection that created the slot
				// stays, holding the exported snapshot.
				if v := scalar(t, src, "SELECT count(*)::text FROM pg_stat_activity WHERE backend_type = 'walsender' AND application_name = 'pgsprint' AND datname = current_database()"); v != "1" {
					t.Errorf("%s pgsprint walsenders while copying, want 1", v)
				}
				if v := scalar(t, src, "SELECT puballtables::text FROM pg_publication WHERE pubname = $1", n.Publication); v != map[bool]string{true: "true", false: "false"}[tc.all] {
					t.Errorf("publication FOR ALL TABLES: %s, want %v", v, tc.all)
				}
				if got := query(t, src, "SELECT tablename::text FROM pg_publication_tables WHERE pubname = $1 AND schemaname <> 'pgsprint' ORDER BY 1", n.Publication); strings.Join(got, ",") != strings.Join(tc.tables, ",") {
					t.Errorf("published tables %v, want %v", got, tc.tables)
				}
				// The DDL capture's table is published too (a superuser
				// source and target).
				if v := scalar(t, src, "SELECT count(*)::text FROM pg_publication_tables WHERE pubname = $1 AND schemaname = 'pgsprint' AND tablename = $2", n.Publication, n.Slot); v != "1" {
					t.Errorf("the DDL capture table is not published")
				}
				if !tc.all {
					if v := scalar(t, src, "SELECT relreplident::text FROM pg_class WHERE relname = 'nokey'"); v != tc.identity {
						t.Errorf("nokey's replica identity while copying: %q, want %q", v, tc.identity)
					}
				}
				// The snapshot is the slot's: a row inserted now is
				// not in it.
				exec(t, src, "INSERT INTO keyed VALUES (100000, 'after')")
				if got := inSnapshot(t, src, snapshot, "SELECT count(*)::text FROM keyed"); got != "2000" {
					t.Errorf("keyed in the slot's snapshot holds %s rows, want 2000", got)
				}
				return failed
			})
			if !ran {
				t.Fatalf("copy did not run: %v", err)
			}
			if !errors.Is(err, failed) || err.Error() != failed.Error() {
				t.Errorf("Clone returned %v, want copy's error as it is", err)
			}
			nothingLeft(t, src, dst, n)
			noCapture(t, src)
			if !tc.all {
				if v := scalar(t, src, "SELECT relreplident::text FROM pg_class WHERE relname = 'nokey'"); v != "d" {
					t.Errorf("nokey's replica identity after the failure: %q, want d", v)
				}
			}
		})
	}
}

// inSnapshot runs sql in a transaction that imports snapshot.
func inSnapshot(t *testing.T, cfg *pgx.ConnConfig, snapshot, sql string) (v string) {
	t.Helper()
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+pg.Literal(snapshot)); err != nil {
				return err
			}
			return tx.QueryRow(ctx, sql).Scan(&v)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	return v
}

// TestCloneCatchUp clones through Clone with rows inserted, updated and
// deleted while the copy runs: the copy, read in the slot's snapshot,
// lacks them; the subscription created after it replays them, and Finish
// catches up, copies the sequences and removes the replication, leaving
// the target's rows and sequences equal to the source's.
func TestCloneCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	for _, tc := range []struct {
		name string
		opts func(o *Options)
		// before and after run on the source during the copy, before
		// and after it reads (a table truncated before it is read
		// stops a clone).
		before, after string
	}{
		{name: "replica identity full", opts: func(o *Options) { o.ReplicaIdentityFull = true },
			before: `INSERT INTO keyed SELECT i, 'new' FROM generate_series(2001, 2500) i;
				UPDATE keyed SET v = 'changed' WHERE id % 7 = 0; DELETE FROM keyed WHERE id % 11 = 0;
				UPDATE nokey SET b = 'changed' WHERE a <= 10; DELETE FROM nokey WHERE a > 90; INSERT INTO nokey VALUES (1000, 'new');
				SELECT nextval('ticket') FROM generate_series(1, 5)`},
		{name: "truncate", opts: func(o *Options) {
			o.SkipNoKey = true
			o.Filter = filter.Options{Selection: filter.Selection{ExcludeTables: []string{"nokey"}}}
		},
			before: `INSERT INTO keyed VALUES (3000, 'new')`, after: `TRUNCATE keyed; INSERT INTO keyed VALUES (1, 'only')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newCase(t, c, sourceSQL)
			src, dst, n := o.Source, o.Target, o.Names
			tc.opts(&o)
			s, err := Clone(ctx, o, func(ctx context.Context, snapshot string, f filter.Options) error {
				exec(t, src, tc.before)
				_, err := clone.Run(ctx, clone.Options{Session: dump.SessionOptions{Source: src, Snapshot: snapshot}, Options: restore.Options{Target: dst, Jobs: 2, Filter: f, Settings: restore.Settings{NoAnalyze: true}}})
				if err != nil {
					return err
				}
				if tc.after != "" {
					exec(t, src, tc.after)
				}
				// The copy is the snapshot's: without the changes.
				if compare.FingerprintDiff(fingerprint(t, src), fingerprint(t, dst)) == nil {
					t.Error("the copy already holds the changes made after the slot's snapshot")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if s.Slot != n.Slot || s.Publication != n.Publication || s.ConsistentPoint == "" {
				t.Errorf("Clone returned %+v", s)
			}
			// The target's own apply worker follows, on the slot.
			if v := scalar(t, dst, "SELECT subenabled::text || ' ' || subslotname::text FROM pg_subscription WHERE subname = $1", n.Slot); v != "true "+n.Slot {
				t.Errorf("subscription: %q", v)
			}
			waitFor(t, dst, "1", "SELECT count(*)::text FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL", n.Slot)
			waitFor(t, src, "true", "SELECT active::text FROM pg_replication_slots WHERE slot_name = $1", n.Slot)
			if v := scalar(t, dst, "SELECT count(*)::text FROM pg_publication"); v != "0" {
				t.Errorf("the copy of the publication is left on the target")
			}
			st, err := ReadState(ctx, src, dst, n)
			if err != nil {
				t.Fatal(err)
			}
			if st.Sub == nil || !st.Sub.Enabled || !strings.HasPrefix(st.Sub.Comment, commentPrefix) || st.Source == nil || !st.Source.Slot || !st.Source.Publication {
				t.Errorf("ReadState: %+v, source %+v", st.Sub, st.Source)
			}
			res, err := Finish(ctx, FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Followed || res.CaughtUp == "" || res.Sequences != 1 {
				t.Errorf("Finish: %+v", res)
			}
			nothingLeft(t, src, dst, n)
			// Every table the follow covers, and the sequence, equal the
			// source's; nokey, left out of the selection, is not copied.
			a, b := fingerprint(t, src), fingerprint(t, dst)
			if o.Filter.Active() {
				for k := range a {
					if strings.Contains(k, "nokey") {
						delete(a, k)
					}
				}
			}
			if d := compare.FingerprintDiff(a, b); len(d) > 0 {
				t.Errorf("target differs from the source after Finish:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}
