package preflight

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestKeepGoingLacks: Restore (of a dump of the keep-going source) and
// Clone (of that source) into a PostgreSQL 18 that lacks ICU, lz4,
// pgcrypto, the tablespace and the role (pgtest.KeepGoingPair, as
// TestKeepGoing in internal/restore and TestKeepGoingClone in
// internal/clone run them) name every missing thing with the objects that
// need it: not ready without KeepGoing, ready with it, saying what would
// be left out or created without its owner or tablespace.
func TestKeepGoingLacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := pgtest.KeepGoingPair(t)
	if err := dst.CreateDB(ctx, "target"); err != nil {
		t.Fatal(err)
	}
	srcConf, dstConf := conf(t, src.ConnString("src")), conf(t, dst.ConnString("target"))
	file := filepath.Join(t.TempDir(), "kg.pgs")
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dump.Run(ctx, dump.Options{Source: srcConf, File: file, Jobs: 2, Codec: c, Version: "test"}); err != nil {
		t.Fatalf("dump: %v", err)
	}
	requirePreflightLacks(t, file, dstConf)
	requirePreflightCloneLacks(t, clone.Options{Session: dump.SessionOptions{Source: srcConf, Version: "test"},
		Options: restore.Options{Target: dstConf, Jobs: 2, Programs: &pgbin.Finder{}}})
}

// conf parses conn.
func conf(t *testing.T, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// checklist runs check without and with KeepGoing and returns each
// checklist as `pgsprint preflight` prints it, with whether it was ready.
func checklist(t *testing.T, check func(keepGoing bool) *Checklist) (without, with string, readyWithout, readyWith bool) {
	t.Helper()
	var b [2]strings.Builder
	var ok [2]bool
	for i, keepGoing := range []bool{false, true} {
		c := check(keepGoing)
		if err := c.Print(&b[i]); err != nil {
			t.Fatal(err)
		}
		ok[i] = c.OK()
		t.Logf("preflight (keep going %v):\n%s", keepGoing, b[i].String())
	}
	return b[0].String(), b[1].String(), ok[0], ok[1]
}

// requirePreflightLacks checks preflight.Restore of the keep-going
// archive (file) into target, which lacks what pgtest.KeepGoingPair's
// lacks: every missing thing is named with the objects that need it;
// without KeepGoing it is not ready, as the restore would stop; with it,
// it is ready and names what would be left out or created without its
// owner or tablespace.
func requirePreflightLacks(t *testing.T, file string, target *pgx.ConnConfig) {
	t.Helper()
	ar, err := archivetest.OpenFile(t, file)
	if err != nil {
		t.Fatal(err)
	}
	without, with, readyWithout, readyWith := checklist(t, func(keepGoing bool) *Checklist {
		return Restore(context.Background(), RestoreOptions{Archive: ar,
			Options: restore.Options{Target: target, Jobs: 1, Where: file, Programs: &pgbin.Finder{}, KeepGoing: keepGoing}})
	})
	if readyWithout || !strings.Contains(without, "not ready") {
		t.Errorf("preflight restore into a target that lacks things: ready, want not ready")
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto`,
		`✗ target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und`,
		`✗ target compression: the target lacks compression method "lz4", needed by TABLE app.packed, TABLE DATA app.packed`,
		`✗ target roles: the target lacks role "kg_owner", owner of TABLE app.owned`,
		`✗ target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go`,
		"the run would stop at the first",
	} {
		if !strings.Contains(without, want) {
			t.Errorf("preflight restore does not say %q", want)
		}
	}
	if !readyWith || !strings.Contains(with, "ready: the run would start") {
		t.Errorf("preflight restore with KeepGoing: not ready, want ready")
	}
	for _, want := range []string{
		`! target extensions: the target lacks extension "pgcrypto"`, "--keep-going leaves them out, and skips the", "TABLE app.hashed",
		"! target collations:", "TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names",
		"! target compression:", "! target roles:", "--keep-going creates them owned by",
		"! target tablespaces:", "--keep-going creates them in the default tablespace",
	} {
		if !strings.Contains(with, want) {
			t.Errorf("preflight restore with KeepGoing does not say %q", want)
		}
	}
}

// requirePreflightCloneLacks checks preflight.Clone of the keep-going
// source into opts' target as requirePreflightLacks does the restore's:
// the source's schema, read as the clone reads it (Contents), says what
// the target lacks.
func requirePreflightCloneLacks(t *testing.T, opts clone.Options) {
	t.Helper()
	without, with, readyWithout, readyWith := checklist(t, func(keepGoing bool) *Checklist {
		o := opts
		o.KeepGoing = keepGoing
		return Clone(context.Background(), CloneOptions{Options: o})
	})
	if readyWithout || !strings.Contains(without, "not ready") {
		t.Errorf("preflight clone into a target that lacks things: ready, want not ready")
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto"`, `✗ target collations: the target lacks collation provider "icu"`,
		`✗ target compression: the target lacks compression method "lz4"`, `✗ target roles: the target lacks role "kg_owner"`,
		`✗ target tablespaces: the target lacks tablespace "kg_space"`,
	} {
		if !strings.Contains(without, want) {
			t.Errorf("preflight clone does not say %q", want)
		}
	}
	if !readyWith || !strings.Contains(with, "ready: the run would start") {
		t.Errorf("preflight clone with KeepGoing: not ready, want ready")
	}
	for _, want := range []string{"! target extensions:", "! target collations:", "! target compression:", "! target roles:", "! target tablespaces:", "TABLE app.sorted"} {
		if !strings.Contains(with, want) {
			t.Errorf("preflight clone with KeepGoing does not say %q", want)
		}
	}
}
