package main

import (
	"context"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCloneIntoItself: a clone whose target is its source would wait for
// its own locks forever; it is refused before anything is read or written,
// however the two are named (a socket and TCP, here).
func TestCloneIntoItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "selfc"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "selfc", `CREATE TABLE public.t AS SELECT generate_series(1, 10) id`); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{c.ConnString("selfc"), c.TCPConnString("selfc", "postgres")} {
		r := pgsprint(t, []string{"PGPASSWORD=" + pgtest.SuperuserPassword}, "clone", "--source", c.ConnString("selfc"), "--target", target, "--clean")
		checkOneError(t, r.code, 2, r.stderr, "--source and --target are the same database")
	}
	if got := pgtest.Scalar(t, c.ConnString("selfc"), `SELECT count(*) FROM public.t`); got != "10" {
		t.Errorf("the source holds %s rows, want 10", got)
	}
	// Another database of the same server is not the same database.
	if err := c.CreateDB(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	mustPgsprint(t, "clone", "-q", "--source", c.ConnString("selfc"), "--target", c.ConnString("other"))
}
