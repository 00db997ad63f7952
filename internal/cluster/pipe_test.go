package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestServerCutPipe: a whole-server archive read from a pipe (a Demux,
// as restore --all -f - reads it) that is cut never looks finished: cut
// in its trailer, after every stream, the databases are restored but
// Restore fails and its journal (the role) stays; cut in the middle, it
// fails too. The whole archive with Resume then finishes it: the
// globals, every database's schema and row hashes equal the source's.
// cmd/pgsprint's TestServerPipeProgressResume pipes dump --all into
// restore --all and kills clone --all.
func TestServerCutPipe(t *testing.T) {
	t.Parallel()
	src, dst := pgtest.New(t), pgtest.New(t)
	pgtest.LoadPipeServer(t, src)
	file := filepath.Join(t.TempDir(), "server.pgs")
	dumpServer(t, src.ConnString("postgres"), file, 2)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := pgtest.Context(t)
	conn, err := pgx.Connect(ctx, dst.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	journaled := func() bool {
		var ok bool
		err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", journal.ClusterRole).Scan(&ok)
		return err == nil && ok
	}
	for _, cut := range []struct {
		name string
		n    int
		want string
	}{
		{"trailer", len(data) - 4, fmt.Sprintf("archive on standard input is incomplete: the input ended after %d bytes, before the archive's trailer (cut off, or the dump writing it failed or is still running); the restore is not finished; run it again with --resume and a sound archive", len(data)-4)},
		{"middle", len(data) / 2, "incomplete"},
	} {
		err := restorePipe(t, data[:cut.n], dst.ConnString("postgres"), func(o *restore.Options) { o.Clean = true })
		if err == nil || !strings.Contains(err.Error(), cut.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("cut in the %s: %v, want one line with %q", cut.name, err, cut.want)
		}
		if !journaled() {
			t.Errorf("cut in the %s: the run looks finished (no journal left)", cut.name)
		}
	}
	if err := restorePipe(t, data, dst.ConnString("postgres"), func(o *restore.Options) { o.Resume = true }); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if journaled() {
		t.Error("the whole-server journal outlived the completed restore")
	}
	pgtest.RequireSameServer(t, src, dst, pgtest.PipeServerDatabases)
}

// restorePipe restores the whole-server archive data as read from
// standard input (`pgsprint restore --all -f - -j 2`), after edit changes
// the options, and returns Restore's error.
func restorePipe(t testing.TB, data []byte, conn string, edit func(*restore.Options)) error {
	t.Helper()
	ctx := pgtest.Context(t)
	f, err := archivetest.OpenLocation(t, "-", bytes.NewReader(data))
	if err != nil {
		return err
	}
	opts := restore.Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: 2}
	edit(&opts)
	_, err = Restore(ctx, RestoreOptions{Options: opts, Source: f.Source})
	return err
}
