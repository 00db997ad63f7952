package follow

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCloneRefusedStandby: a streaming standby as the source is refused
// before anything is created, with one reason naming pg_is_in_recovery(),
// and preflight's follow checks (what pgsprint preflight clone --follow
// prints) say the same. It runs on the newest PostgreSQL installed, 16
// or later: there the standby could decode, but the publication and
// finish's fence are writes.
func TestCloneRefusedStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	vs := pgtest.Versions()
	if len(vs) == 0 || vs[len(vs)-1] < 16 {
		t.Skipf("needs PostgreSQL 16 or later, which decodes on a standby; installed: %v", vs)
	}
	bin, err := pgtest.BinDirFor(vs[len(vs)-1])
	if err != nil {
		t.Fatal(err)
	}
	primary := newLogical(t, bin)
	o := newCase(t, primary, sourceSQL)
	o.SkipNoKey = true
	// The base backup holds the source database: the standby accepts
	// connections once it is consistent, so nothing need be replayed.
	standby := pgtest.NewStandby(t, primary)
	o.Source = config(t, standby.ConnString(o.Source.Database))
	if v := scalar(t, o.Source, "SELECT current_setting('server_version_num')"); v < "160000" {
		t.Fatalf("the standby runs PostgreSQL %s, want 16 or later", v)
	}
	const want = "source is a standby (pg_is_in_recovery() is true): --follow needs the primary"
	withConn(t, o.Source, func(ctx context.Context, conn *pgx.Conn) {
		req, err := ReadSourceSettings(ctx, conn, o.Names.Slot, o.Names.Publication)
		if err != nil {
			t.Fatal(err)
		}
		items := req.Requirements()
		if len(items) != 1 || items[0].Err == nil || !strings.Contains(items[0].Err.Error(), want) {
			t.Errorf("the follow's requirements on a standby: %+v", items)
		}
	})
	_, err = Clone(ctx, o, func(context.Context, string, filter.Options) error {
		t.Error("copy ran on a standby source")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Clone from a standby: %v, want one line saying %q", err, want)
	}
	if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_subscription"); v != "0" {
		t.Errorf("%s subscriptions on the target after the refusal", v)
	}
}
