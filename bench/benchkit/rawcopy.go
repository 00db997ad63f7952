package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// RawCopy is the raw limit: the chunks pgsprint would dump, read in one
// exported snapshot with exactly its COPY statements over jobs
// connections, largest first, into io.Discard. No archive, no
// compression, no schema: what the server and the wire can deliver.
func RawCopy(ctx context.Context, connString string, jobs int, split chunk.Options) error {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return err
	}
	leader, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer leader.Close(context.WithoutCancel(ctx))
	srv, err := pg.ReadServer(ctx, leader)
	if err != nil {
		return err
	}
	snap, err := pg.ExportSnapshot(ctx, leader)
	if err != nil {
		return err
	}
	tables, err := pg.ListTables(ctx, leader, srv)
	if err != nil {
		return err
	}
	type job struct {
		sql  string
		size int64
	}
	var work []job
	split.Jobs = jobs
	for _, t := range tables {
		chunks, err := chunk.Split(ctx, leader, srv, t, split)
		if err != nil {
			return err
		}
		at := archive.Table{Schema: t.Schema, Name: t.Name, Columns: t.Columns}
		for _, c := range chunks {
			work = append(work, job{dump.CopyOutSQL(at, archive.Chunk{Where: c.Where}, srv.Encoding), c.Size})
		}
	}
	chunk.LargestFirst(work, func(j job) int64 { return j.size })

	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan job)
	g.Go(func() error {
		defer close(queue)
		for _, j := range work {
			select {
			case queue <- j:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range jobs {
		g.Go(func() error {
			conn, err := pg.Connect(gctx, dump.BulkReadConfig(cfg))
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			if err := pg.ImportSnapshot(gctx, conn, snap.ID); err != nil {
				return err
			}
			for j := range queue {
				if _, err := conn.PgConn().CopyTo(gctx, io.Discard, j.sql); err != nil {
					return fmt.Errorf("%s: %w", j.sql, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// RawCopySubcommand is the hidden subcommand a benchmark program measures
// as the raw limit's own process: "PROGRAM rawcopy CONNSTRING JOBS
// [CHUNKSIZE]". Called first in main, it runs that and exits when args
// ask for it, and returns otherwise.
func RawCopySubcommand(ctx context.Context, args []string) {
	if len(args) < 2 || args[1] != "rawcopy" {
		return
	}
	if err := rawCopyMain(ctx, args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "rawcopy:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RawCopyArgs are the arguments after the program that run RawCopy as
// RawCopySubcommand reads them.
func RawCopyArgs(connString string, jobs int, chunkSize int64) []string {
	return []string{"rawcopy", connString, strconv.Itoa(jobs), strconv.FormatInt(chunkSize, 10)}
}

func rawCopyMain(ctx context.Context, args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: rawcopy CONNSTRING JOBS CHUNKSIZE")
	}
	jobs, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	size, err := strconv.ParseInt(args[2], 10, 64)
	if err != nil {
		return err
	}
	return RawCopy(ctx, args[0], jobs, chunk.Options{ChunkSize: size, Method: chunk.Auto})
}
