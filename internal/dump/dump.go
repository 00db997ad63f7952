// Package dump writes a database to one pgsprint archive: one exported
// snapshot, pg_dump for the schema, and table data, sequences and large
// objects read by parallel workers and compressed in them.
package dump

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/plan"
)

// DefaultBlockSize is the raw size of a data block: big enough for codecs
// to work well, small enough that N workers' buffers stay a few MiB.
const DefaultBlockSize = 1 << 20

// Options configure one dump.
type Options struct {
	Source    *pgx.ConnConfig
	File      string    // archive path, written under a temporary name first; "-" for Stdout
	Stdout    io.Writer // where File "-" writes
	Jobs      int
	Codec     codec.Codec
	BlockSize int
	// Split says which tables are cut into chunks, and how.
	Split   plan.Options
	Version string // pgsprint's version, recorded in the manifest
	Logger  *slog.Logger
}

// Result summarises a finished dump.
type Result struct {
	Tables       int
	Chunks       int // table data streams: more than Tables when tables were split
	LargeObjects int
	Sequences    int
	Rows         int64
	RawBytes     int64
	StoredBytes  int64
	Elapsed      time.Duration
}

// Run dumps the source database into opts.File. On any error the partial
// file is removed: a file at opts.File is always a complete archive.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	if opts.BlockSize <= 0 {
		opts.BlockSize = DefaultBlockSize
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	leader, err := pg.Connect(ctx, opts.Source)
	if err != nil {
		return nil, err
	}
	defer leader.Close(context.WithoutCancel(ctx))

	srv, err := pg.ReadServer(ctx, leader)
	if err != nil {
		return nil, err
	}
	tools, err := pgbin.Find(ctx, srv.Major())
	if err != nil {
		return nil, err
	}
	snap, err := pg.ExportSnapshot(ctx, leader)
	if err != nil {
		return nil, err
	}
	log.Info("snapshot exported", "snapshot", snap.ID, "server", srv.Version, "pg_dump", tools.Version)

	opts.Split.Jobs = opts.Jobs
	cat, err := readCatalog(ctx, leader, srv, opts.Split)
	if err != nil {
		return nil, err
	}
	// The schema must come from the pg_dump chosen for this server, not
	// whatever pg_dump is first on PATH.
	cat.tools = tools
	m, sizes := cat.manifest(srv, snap, tools, opts)

	out, err := openOutput(opts.File, opts.Stdout)
	if err != nil {
		return nil, err
	}
	defer out.Abort()

	w, err := archive.NewWriter(out, m, opts.Codec)
	if err != nil {
		return nil, fmt.Errorf("write archive header: %w", err)
	}

	res := &Result{Tables: len(m.Tables), Chunks: len(m.Chunks), LargeObjects: len(m.LargeObjects), Sequences: len(m.Sequences)}
	if err := runWorkers(ctx, opts, w, snap.ID, cat, m, planUnits(m, sizes), res); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("write archive footer: %w", err)
	}
	// The snapshot may end only now: every reader has finished with it.
	if _, err := leader.Exec(ctx, "COMMIT"); err != nil {
		return nil, fmt.Errorf("end snapshot transaction: %w", err)
	}
	if err := out.Commit(); err != nil {
		return nil, err
	}
	res.RawBytes, res.StoredBytes = w.Bytes()
	res.Elapsed = time.Since(start)
	return res, nil
}

// runWorkers runs pg_dump for the schema beside N data workers, all in the
// one snapshot. The first error cancels everything.
func runWorkers(ctx context.Context, opts Options, w *archive.Writer, snapID string, cat *catalog, m *archive.Manifest, work []unit, res *Result) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return dumpSchema(gctx, opts.Source, snapID, cat.tools, w.Stream(archive.KindSchema, m.SchemaStream), opts.BlockSize)
	})

	units := make(chan unit)
	g.Go(func() error {
		defer close(units)
		for _, u := range work {
			select {
			case units <- u:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	rows := make([]int64, opts.Jobs)
	for i := 0; i < opts.Jobs; i++ {
		g.Go(func() error {
			n, err := worker(gctx, opts, w, snapID, m, units)
			rows[i] = n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("dump interrupted: %w", context.Cause(ctx))
		}
		return err
	}
	for _, n := range rows {
		res.Rows += n
	}
	return nil
}
