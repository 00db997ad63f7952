package clone

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestCloneNeverTouchesOthers: a clone into a target holding any object
// at all (one sequence, type, domain, function, schema or large object)
// is refused before anything is created, in one line naming the object,
// and the target still holds exactly that object afterwards, no journal.
// internal/restore's TestRestoreNeverTouchesOthers holds the restore's
// side of the same promise.
func TestCloneNeverTouchesOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", pgtest.NotOursSQL()); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name string
		ddl  string
		want string // the object as the error and pg.UserObjects name it
	}{
		{"sequence of the source's name", "CREATE SEQUENCE public.t1_id_seq; SELECT setval('public.t1_id_seq', 777)", "sequence public.t1_id_seq"},
		{"type", "CREATE TYPE public.color AS ENUM ('red')", "type public.color"},
		{"domain", "CREATE DOMAIN public.posint AS int CHECK (VALUE > 0)", "type public.posint"},
		{"function", "CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", "function public.answer()"},
		{"schema", "CREATE SCHEMA lonely", "schema lonely"},
		{"large object", "SELECT lo_create(4242)", "large object 4242"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "tgt" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(ctx, db, tc.ddl); err != nil {
				t.Fatal(err)
			}
			target := c.ConnString(db)
			_, err := Run(pgtest.Context(t), Options{Session: dump.SessionOptions{Source: pgtest.Config(t, c.ConnString("src")),
				Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test"},
				Options: restore.Options{Target: pgtest.Config(t, target), Jobs: 2}})
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "is not empty: it holds "+tc.want) {
				t.Fatalf("clone: %v, want one line saying the target holds %s", err, tc.want)
			}
			cn, err := pgx.Connect(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			defer cn.Close(ctx)
			if _, got, err := pg.UserObjects(ctx, cn, 20); err != nil || len(got) != 1 || got[0] != tc.want {
				t.Fatalf("the target holds %v (%v), want only %s", got, err, tc.want)
			}
		})
	}
}
