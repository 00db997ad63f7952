package follow

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
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

// ddlSourceSQL is the DDL tests' source: a keyed table, a partitioned one
// and a table to drop.
const ddlSourceSQL = `CREATE TABLE keyed (id int PRIMARY KEY, v text);
	CREATE TABLE events (id int, at int, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
	CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (100);
	CREATE TABLE events_2 PARTITION OF events FOR VALUES FROM (100) TO (200);
	CREATE TABLE gone (id int PRIMARY KEY);
	CREATE TABLE selected_a (id int PRIMARY KEY);
	INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 500) i;
	INSERT INTO events SELECT i, i % 200 FROM generate_series(1, 400) i;
	INSERT INTO gone SELECT generate_series(1, 10);
	INSERT INTO selected_a SELECT generate_series(1, 10);
	DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ddl_app') THEN CREATE ROLE ddl_app LOGIN; END IF; END $$;
	GRANT CREATE ON SCHEMA public TO ddl_app`

// sameAll is a Verify that compares the rows (of v.Tables for a
// selection) and pg_dump's schemas of both sides (of v.Tables too), as
// follow finish does, while the replication and the capture exist.
func sameAll(c *pgtest.Instance, srcDB, dstDB string) func(context.Context, Verification) error {
	src, dst := c.ConnString(srcDB), c.ConnString(dstDB)
	return func(ctx context.Context, v Verification) error {
		cfgs := make([]*pgx.ConnConfig, 2)
		for i, s := range []string{src, dst} {
			cfg, err := pgx.ParseConfig(s)
			if err != nil {
				return err
			}
			cfgs[i] = cfg
		}
		fps := make([]map[string]string, 2)
		for i, cfg := range cfgs {
			fp, err := compare.FingerprintParallel(ctx, cfg, 2)
			if err != nil {
				return err
			}
			if v.Tables != nil {
				keep := map[string]bool{}
				for _, t := range v.Tables {
					keep[t] = true
				}
				for k := range fp {
					if !keep[k] {
						delete(fp, k)
					}
				}
			}
			fps[i] = fp
		}
		if d := compare.FingerprintDiff(fps[0], fps[1]); len(d) > 0 {
			return fmt.Errorf("rows differ: %s", strings.Join(d, "; "))
		}
		sel := []string{"--no-publications", "--no-subscriptions"}
		for _, t := range v.Tables {
			sel = append(sel, "--table="+t)
		}
		a, err := compare.SchemaDump(ctx, c.BinDir(), src, sel...)
		if err != nil {
			return err
		}
		b, err := compare.SchemaDump(ctx, c.BinDir(), dst, sel...)
		if err != nil {
			return err
		}
		if d := compare.SchemaDiff(a, b); d != "" {
			return fmt.Errorf("schemas differ:\n%s", d)
		}
		return nil
	}
}

// noCapture fails unless cfg's database has no capture left.
func noCapture(t *testing.T, cfg *pgx.ConnConfig) {
	t.Helper()
	if v := scalar(t, cfg, `SELECT (SELECT count(*) FROM pg_event_trigger) + (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsprint')`); v != "0" {
		t.Errorf("%s: event triggers or schema pgsprint left", cfg.Database)
	}
}

// TestFollowDDL: DDL run on the source while the target follows (and
// between the copy and the subscription), with rows written between the
// statements. Replayable statements (ADD, ALTER and DROP COLUMN, CREATE
// INDEX CONCURRENTLY, CREATE TABLE with rows, by another role too, a new
// partition, DROP TABLE) end with finish declaring the target equal to
// the source, schemas and rows; a statement the target cannot replay
// (a default evaluated once, several statements in one string, DDL in a
// DO block, CREATE TABLE AS) stops status and finish at once, named; a
// selection follows the new tables it selects only; without superuser,
// the catalogs' drift stops.
func TestFollowDDL(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	t.Run("replayed", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL)
		src, dst, n := o.Source, o.Target, o.Names
		// DDL after the copy read the source and before the target
		// subscribed: in the slot, replayed once the subscription starts.
		if _, err := Clone(context.Background(), o, func(ctx context.Context, snapshot string, f filter.Options) error {
			_, err := clone.Run(ctx, clone.Options{Session: dump.SessionOptions{Source: src, Snapshot: snapshot}, Options: restore.Options{Target: dst, Jobs: 2, Settings: restore.Settings{NoAnalyze: true}}})
			exec(t, src, "ALTER TABLE keyed ADD COLUMN early text")
			exec(t, src, "UPDATE keyed SET early = 'e' WHERE id <= 5")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			"ALTER TABLE keyed ADD COLUMN extra int DEFAULT 7",
			"INSERT INTO keyed VALUES (1000, 'new', 1)",
			"UPDATE keyed SET extra = id WHERE id < 50",
			"ALTER TABLE keyed ALTER COLUMN extra TYPE bigint",
			"UPDATE keyed SET extra = 1 << 40 WHERE id = 1",
			"CREATE INDEX CONCURRENTLY keyed_v ON keyed (v)",
			"ALTER TABLE keyed ADD COLUMN dropme text",
			"UPDATE keyed SET dropme = 'x' WHERE id < 10",
			"ALTER TABLE keyed DROP COLUMN dropme",
			"DELETE FROM keyed WHERE id BETWEEN 100 AND 120",
			"CREATE TABLE fresh (id int PRIMARY KEY, t text)",
			"INSERT INTO fresh SELECT i, 'f' || i FROM generate_series(1, 300) i",
			"CREATE TABLE events_3 PARTITION OF events FOR VALUES FROM (200) TO (300)",
			"INSERT INTO events SELECT i, 200 + i % 100 FROM generate_series(1000, 1200) i",
			"DROP TABLE gone",
			"UPDATE fresh SET t = 'changed' WHERE id < 20",
			// Semicolons inside a dollar quote; a long statement is read in
			// linear time.
			"CREATE FUNCTION one() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$",
			// Replayed once, not once per command of its script.
			"CREATE EXTENSION citext",
			"COMMENT ON TABLE keyed IS '" + strings.Repeat("é;", 100000) + "'",
		} {
			exec(t, src, q)
		}
		// Replayed as the role that ran it: the same owner on both sides.
		app := src.Copy()
		app.User = "ddl_app"
		exec(t, app, "CREATE TABLE owned (id int PRIMARY KEY)")
		exec(t, app, "INSERT INTO owned VALUES (1)")
		// Nobody else writes statements for the target to run.
		withConn(t, app, func(ctx context.Context, conn *pgx.Conn) {
			if _, err := conn.Exec(ctx, "SELECT "+captureNames(n.Slot).record+"('ddl_command_end', 'CREATE TABLE', '', '')"); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("another role calls the recording function: %v", err)
			}
		})
		st, err := ReadState(context.Background(), src, dst, n)
		if err != nil {
			t.Fatal(err)
		}
		if st.DDL == nil || !st.DDL.Captured || st.DDL.Err() != nil || st.DDL.Replayed != 13 {
			t.Errorf("status's DDL: %d statements captured, stops %v, want 13 and none", st.DDL.Replayed, st.DDL.Stops)
		}
		if got := strings.Join(st.DDL.Pending, ","); got != "public.events_3,public.fresh,public.owned" {
			t.Errorf("status's new tables: %s", got)
		}
		// The target replays in order, the new table's rows come at finish.
		waitFor(t, dst, "1", "SELECT count(*)::text FROM pg_attribute WHERE attrelid = 'keyed'::regclass AND attname = 'extra' AND atttypid = 'int8'::regtype")
		res, err := Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Grace: time.Second,
			Verify: sameAll(c, src.Database, dst.Database)})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified {
			t.Errorf("not verified: %+v", res)
		}
		if v := scalar(t, dst, "SELECT relowner::regrole::text FROM pg_class WHERE relname = 'owned'"); v != "ddl_app" {
			t.Errorf("owned is owned by %s on the target, want ddl_app", v)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM keyed WHERE early = 'e'"); v != "5" {
			t.Errorf("keyed.early on the target: %s rows set, want 5", v)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM fresh WHERE t = 'changed'"); v != "19" {
			t.Errorf("fresh on the target: %s changed rows, want 19", v)
		}
		nothingLeft(t, src, dst, n)
		noCapture(t, src)
		noCapture(t, dst)
	})
	t.Run("stop", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL)
		following(t, o)
		src, dst, n := o.Source, o.Target, o.Names
		exec(t, src, "ALTER TABLE keyed ADD COLUMN at timestamptz DEFAULT now()")
		exec(t, src, "INSERT INTO keyed (id, v) VALUES (2000, 'after')")
		// Statements whose text is not the statement alone.
		exec(t, src, "ALTER TABLE keyed ADD COLUMN a int; ALTER TABLE keyed ADD COLUMN b int")
		exec(t, src, "DO $$ BEGIN EXECUTE 'CREATE TABLE in_do (id int)'; END $$")
		exec(t, src, "CREATE TABLE copied AS SELECT * FROM keyed")
		// Semicolons in quotes and comments are no second statement.
		exec(t, src, "COMMENT ON TABLE keyed IS 'a; b' -- c; d\n")
		if st, err := ReadState(context.Background(), src, dst, n); err != nil {
			t.Fatal(err)
		} else {
			want := []string{"ALTER TABLE: the default of public.keyed.at is evaluated once",
				"ALTER TABLE: it runs inside a function", "ALTER TABLE: it runs inside a function",
				"CREATE TABLE: it runs inside a function", "CREATE TABLE AS: it creates a table with rows"}
			ok := len(st.DDL.Stops) == len(want) && st.DDL.Replayed == 1
			for i, s := range st.DDL.Stops {
				ok = ok && i < len(want) && strings.HasPrefix(s.Tag+": "+s.Reason, want[i])
			}
			if !ok {
				t.Errorf("stops %+v, want %q; %d replayed, want 1 (the comment)", st.DDL.Stops, want, st.DDL.Replayed)
			}
		}
		for _, from := range []*pgx.ConnConfig{src, nil} {
			var st *State
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				var err error
				if st, err = ReadState(context.Background(), from, dst, n); err != nil {
					t.Fatal(err)
				}
				if st.DDL.Err() != nil || time.Now().After(deadline) {
					break
				}
			}
			err := st.DDL.Err()
			if err == nil || !strings.Contains(err.Error(), "ALTER TABLE public.keyed (ALTER TABLE keyed ADD COLUMN at timestamptz DEFAULT now())") ||
				!strings.Contains(err.Error(), "evaluated once") {
				t.Errorf("status (source read: %v): %v", from != nil, err)
			}
		}
		// The target's apply worker stops rather than fail on the rows.
		waitFor(t, dst, "false", "SELECT subenabled::text FROM pg_subscription WHERE subname = $1", n.Slot)
		waitFor(t, dst, "0", "SELECT count(*)::text FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL", n.Slot)
		began := time.Now()
		_, err := Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Verify: sameAll(c, src.Database, dst.Database)})
		if err == nil || !strings.Contains(err.Error(), "cannot follow: ALTER TABLE public.keyed") || time.Since(began) > 10*time.Second {
			t.Errorf("finish after %s: %v", time.Since(began), err)
		}
		if fenced(t, src) {
			t.Error("the source is fenced after finish stopped on DDL")
		}
		if _, err := Abort(context.Background(), src, dst, n); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, src, dst, n)
		noCapture(t, src)
		noCapture(t, dst)
	})
	// Issue 41, items 5 and 11: a CREATE INDEX CONCURRENTLY after a
	// comment, a failed CREATE UNIQUE INDEX CONCURRENTLY and its DROP
	// INDEX, a stored generated column: replayed, finish equal.
	t.Run("replayed issue 41", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL+`; CREATE TABLE dup (id int PRIMARY KEY, k int); INSERT INTO dup VALUES (1, 1), (2, 1)`)
		following(t, o)
		src, dst, n := o.Source, o.Target, o.Names
		for _, q := range []string{
			"/* migration 42 */ CREATE INDEX CONCURRENTLY keyed_v ON keyed (v)",
			"INSERT INTO keyed (id, v) VALUES (5000, 'after the index')",
			"ALTER TABLE keyed ADD COLUMN g int GENERATED ALWAYS AS (id * 10) STORED",
			"INSERT INTO keyed (id, v) VALUES (5001, 'generated')",
			"DROP INDEX dup_k",
			"INSERT INTO dup VALUES (3, 3)",
		} {
			if q == "DROP INDEX dup_k" {
				withConn(t, src, func(ctx context.Context, conn *pgx.Conn) {
					if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX CONCURRENTLY dup_k ON dup (k)"); err == nil {
						t.Fatal("CREATE UNIQUE INDEX CONCURRENTLY on duplicates succeeded")
					}
				})
			}
			exec(t, src, q)
		}
		st, err := ReadState(context.Background(), src, dst, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.DDL.Err(); err != nil || st.DDL.Replayed != 3 {
			t.Errorf("status's DDL: %d replayed, want 3; %v", st.DDL.Replayed, err)
		}
		waitFor(t, dst, "1", "SELECT count(*)::text FROM dup WHERE id = 3")
		if v := scalar(t, dst, "SELECT coalesce(sum(apply_error_count), 0)::text FROM pg_stat_subscription_stats WHERE subname = $1", n.Slot); v != "0" {
			t.Errorf("%s apply errors on the target", v)
		}
		res, err := Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Grace: time.Second,
			Verify: sameAll(c, src.Database, dst.Database)})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified {
			t.Errorf("not verified: %+v", res)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM pg_indexes WHERE indexname = 'keyed_v'"); v != "1" {
			t.Errorf("keyed_v on the target: %s, want 1", v)
		}
		nothingLeft(t, src, dst, n)
	})
	// Issue 41, items 5 and 6: statements that would not replay exactly
	// are stops named by status and by finish before the fence; the
	// INSERT of a query string that also holds DDL is applied once.
	t.Run("stops issue 41", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL+"; CREATE DOMAIN ts_now AS timestamptz DEFAULT now()")
		following(t, o)
		src, dst, n := o.Source, o.Target, o.Names
		exec(t, src, `COMMENT ON TABLE keyed IS E'\''; INSERT INTO keyed (id, v) VALUES (3000, 'x'); SELECT 'x'`)
		waitFor(t, dst, "false", "SELECT subenabled::text FROM pg_subscription WHERE subname = $1", n.Slot)
		waitFor(t, dst, "1", "SELECT count(*)::text FROM keyed WHERE id = 3000")
		stops := []string{
			"ALTER TABLE keyed ALTER COLUMN id TYPE bigint USING (id + random() * 0)::bigint",
			"ALTER TABLE keyed ADD COLUMN at timestamptz DEFAULT 'now'",
			"ALTER TABLE keyed ADD COLUMN c ts_now",
			"ALTER TABLE events DETACH PARTITION events_2 CONCURRENTLY",
		}
		for _, q := range stops {
			exec(t, src, q)
		}
		st, err := ReadState(context.Background(), src, dst, n)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"it runs inside a function, procedure or DO block, or in one query string with other statements",
			"its USING expression calls random", "it holds the constant 'now'", "the default of public.keyed.c is evaluated once",
			"DETACH PARTITION CONCURRENTLY"}
		ok := len(st.DDL.Stops) == len(want)
		for i, s := range st.DDL.Stops {
			ok = ok && i < len(want) && strings.HasPrefix(s.Reason, want[i])
		}
		if !ok {
			t.Errorf("stops %v, want reasons %q", st.DDL.Stops, want)
		}
		_, err = Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "cannot follow: COMMENT") {
			t.Errorf("finish: %v", err)
		}
		if fenced(t, src) {
			t.Error("the source is fenced after finish stopped on DDL")
		}
		if _, err := Abort(context.Background(), src, dst, n); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, src, dst, n)
		noCapture(t, src)
		noCapture(t, dst)
	})
	// A statement the target cannot run (a table it already has) is a
	// stop named from the target's copy, not an apply worker failing
	// over and over.
	t.Run("target cannot run it", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL)
		following(t, o)
		src, dst, n := o.Source, o.Target, o.Names
		exec(t, dst, "CREATE TABLE clash (id int)")
		exec(t, src, "CREATE TABLE clash (id int PRIMARY KEY)")
		waitFor(t, dst, "false", "SELECT subenabled::text FROM pg_subscription WHERE subname = $1", n.Slot)
		for _, from := range []*pgx.ConnConfig{src, nil} {
			st, err := ReadState(context.Background(), from, dst, n)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.DDL.Err(); err == nil || !strings.Contains(err.Error(), `CREATE TABLE public.clash, public.clash_pkey (CREATE TABLE clash (id int PRIMARY KEY)): the target could not replay it: relation "clash" already exists`) {
				t.Errorf("status (source read: %v): %v", from != nil, err)
			}
		}
		if v := scalar(t, dst, "SELECT coalesce(sum(apply_error_count), 0)::text FROM pg_stat_subscription_stats WHERE subname = $1", n.Slot); v != "0" {
			t.Errorf("%s apply errors on the target", v)
		}
		_, err := Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "the target could not replay it") || fenced(t, src) {
			t.Errorf("finish: %v (fenced: %v)", err, fenced(t, src))
		}
		if _, err := Abort(context.Background(), src, dst, n); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, src, dst, n)
	})
	t.Run("selection", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, ddlSourceSQL)
		o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"keyed", "selected_*"}}}
		following(t, o)
		src, dst, n := o.Source, o.Target, o.Names
		for _, q := range []string{
			"CREATE TABLE selected_b (id int PRIMARY KEY, t text)",
			"INSERT INTO selected_b SELECT i, 'b' FROM generate_series(1, 50) i",
			"CREATE TABLE other (id int PRIMARY KEY)",
			"INSERT INTO other SELECT generate_series(1, 5)",
			"ALTER TABLE gone ADD COLUMN outside int",
			"CREATE INDEX ON events (id)",
			"ALTER TABLE keyed ADD COLUMN inside int DEFAULT 3",
		} {
			exec(t, src, q)
		}
		if _, err := Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Grace: time.Second,
			Verify: func(ctx context.Context, v Verification) error {
				if !strings.Contains(strings.Join(v.Tables, ","), "public.selected_b") {
					t.Errorf("selected_b is not among the followed tables: %v", v.Tables)
				}
				return sameAll(c, src.Database, dst.Database)(ctx, v)
			}}); err != nil {
			t.Fatal(err)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM selected_b"); v != "50" {
			t.Errorf("selected_b on the target: %s rows, want 50", v)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM pg_class WHERE relname IN ('gone', 'events')"); v != "0" {
			t.Errorf("tables outside the selection on the target: %s", v)
		}
		if v := scalar(t, dst, "SELECT count(*)::text FROM other"); v != "0" {
			t.Errorf("other, outside the selection, has %s rows on the target", v)
		}
		nothingLeft(t, src, dst, n)
		noCapture(t, src)
		noCapture(t, dst)
	})
	t.Run("no superuser", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, `CREATE TABLE keyed (id int PRIMARY KEY, v text);
			INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 100) i;
			DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'follower') THEN CREATE ROLE follower LOGIN REPLICATION; END IF; END $$;
			ALTER TABLE keyed OWNER TO follower`)
		exec(t, o.Source, "GRANT CREATE ON DATABASE "+pg.Ident(o.Source.Database)+" TO follower")
		o.Source.User = "follower"
		var logged bytes.Buffer
		o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		following(t, o)
		if !strings.Contains(logged.String(), "DDL on the source during the follow is not replayed") {
			t.Errorf("no warning at clone time; logged:\n%s", logged.String())
		}
		src, dst, n := o.Source, o.Target, o.Names
		noCapture(t, src)
		admin := src.Copy()
		admin.User = dst.User
		exec(t, admin, "ALTER TABLE keyed ADD COLUMN extra int")
		st, err := ReadState(context.Background(), src, dst, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.DDL.Err(); err == nil || !strings.Contains(err.Error(), "columns of public.keyed changed on the source: (id integer, v text, extra integer), on the target (id integer, v text)") {
			t.Errorf("status without capture: %v", err)
		}
		_, err = Finish(context.Background(), FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute})
		if err == nil || !strings.Contains(err.Error(), "not followed (capturing DDL needs superuser") {
			t.Errorf("finish without capture: %v", err)
		}
		if fenced(t, src) {
			t.Error("the source is fenced after finish stopped on DDL")
		}
		if _, err := Abort(context.Background(), src, dst, n); err != nil {
			t.Fatal(err)
		}
		nothingLeft(t, src, dst, n)
	})
}
