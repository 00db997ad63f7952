package follow

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// partitionSQL is a source with a partitioned table of three partitions
// (one of them sub-partitioned) and a table the selection leaves out.
const partitionSQL = `CREATE TABLE ev (id int, at date, v text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
	CREATE TABLE ev_2024 PARTITION OF ev FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
	CREATE TABLE ev_2025 PARTITION OF ev FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY RANGE (at);
	CREATE TABLE ev_2025h1 PARTITION OF ev_2025 FOR VALUES FROM ('2025-01-01') TO ('2025-07-01');
	CREATE TABLE ev_2025h2 PARTITION OF ev_2025 FOR VALUES FROM ('2025-07-01') TO ('2026-01-01');
	CREATE TABLE ev_2026 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
	CREATE TABLE other (id int PRIMARY KEY);
	INSERT INTO other SELECT generate_series(1, 10);
	INSERT INTO ev SELECT i, date '2024-01-01' + (i % 1000), 'v' || i FROM generate_series(1, 3000) i`

// partitionRows is, for each leaf partition of ev, its row count and a
// hash of its rows in key order.
func partitionRows(t *testing.T, cfg *pgx.ConnConfig) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{"ev_2024", "ev_2025h1", "ev_2025h2", "ev_2026"} {
		out[p] = scalar(t, cfg, "SELECT count(*) || ' ' || coalesce(md5(string_agg(format('%s|%s|%s', id, at, v), ',' ORDER BY id, at)), '') FROM ONLY "+p)
	}
	return out
}

// TestFollowPartitioned: clone --follow -t on a partitioned table copies
// and follows its partitions (sub-partitions included), and only them;
// rows written into the partitions during the follow, moved across
// partitions and deleted are on the target after Finish, partition by
// partition.
func TestFollowPartitioned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	o := newCase(t, c, partitionSQL)
	o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"ev"}}}
	if _, err := Clone(ctx, o, func(ctx context.Context, snapshot string, f filter.Options) error {
		_, err := clone.Run(ctx, clone.Options{Session: dump.SessionOptions{Source: o.Source, Snapshot: snapshot}, Options: restore.Options{Target: o.Target, Jobs: 2, Filter: f, Settings: restore.Settings{NoAnalyze: true}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, o.Target, "1", "SELECT count(*)::text FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL", o.Names.Slot)
	if v := scalar(t, o.Target, "SELECT (to_regclass('public.other') IS NULL)::text"); v != "true" {
		t.Error("the table left out of the selection was copied")
	}
	exec(t, o.Source, `INSERT INTO ev SELECT i, date '2024-01-01' + (i % 1000), 'new' FROM generate_series(3001, 3600) i;
		UPDATE ev SET v = 'changed' WHERE id % 7 = 0;
		UPDATE ev SET at = at + 400 WHERE id % 13 = 0 AND at < '2025-06-01';
		DELETE FROM ev WHERE id % 11 = 0;
		INSERT INTO other VALUES (11)`)
	var out bytes.Buffer
	res, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute, Out: &out,
		Verify: func(ctx context.Context, v Verification) error {
			var tables []string // the DDL capture's table is published too
			for _, tb := range v.Tables {
				if !strings.HasPrefix(tb, "pgsprint.") {
					tables = append(tables, tb)
				}
			}
			if got := strings.Join(tables, ","); got != "public.ev,public.ev_2024,public.ev_2025,public.ev_2025h1,public.ev_2025h2,public.ev_2026" {
				t.Errorf("Verify's tables: %s", got)
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("Finish: %v\n%s", err, out.String())
	}
	if !res.Followed || !res.Verified {
		t.Errorf("Finish: %+v", res)
	}
	a, b := partitionRows(t, o.Source), partitionRows(t, o.Target)
	for p, want := range a {
		if b[p] != want {
			t.Errorf("partition %s: target %q, source %q", p, b[p], want)
		}
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
}

// TestFinishNeverSubscribed: a clone --follow whose subscription could
// not be created (here: the copy left the target without the followed
// table) keeps the slot and the publication; a finish then refuses with
// the true reason, twice, and verifies, drops and fences nothing. Once
// abort removed them, a finish says there is nothing to finish.
func TestFinishNeverSubscribed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	o := newCase(t, c, sourceSQL)
	o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"keyed"}}}
	_, err := Clone(ctx, o, func(context.Context, string, filter.Options) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "create subscription") {
		t.Fatalf("Clone: %v, want the subscription refused", err)
	}
	fo := FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: 10 * time.Second,
		Verify: func(context.Context, Verification) error {
			t.Error("Finish compared a follow that never began")
			return nil
		}}
	for range 2 {
		_, err := Finish(ctx, fo)
		if err == nil || !strings.Contains(err.Error(), "the follow never began") || !strings.Contains(err.Error(), "follow abort") {
			t.Errorf("Finish: %v, want it refused as never begun", err)
		}
	}
	if v := scalar(t, o.Source, "SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = $1", o.Names.Slot); v != "1" {
		t.Error("the refused finish dropped the slot")
	}
	if v := scalar(t, o.Source, "SELECT count(*)::text FROM pg_publication WHERE pubname = $1", o.Names.Publication); v != "1" {
		t.Error("the refused finish dropped the publication")
	}
	if fenced(t, o.Source) {
		t.Error("the refused finish fenced the source")
	}
	if _, err := Abort(ctx, o.Source, o.Target, o.Names); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
	if _, err := Finish(ctx, fo); err == nil || !strings.Contains(err.Error(), "nothing to finish") {
		t.Errorf("Finish after abort: %v, want nothing to finish", err)
	}
}
