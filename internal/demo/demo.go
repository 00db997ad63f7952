// Package demo runs pgsprint's main job end to end on a throwaway local
// cluster: sample data, dump, restore, verify, and the same with pg_dump and
// pg_restore for comparison, all measured in one run.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgctl"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/sample"
	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// Options configure the demo.
type Options struct {
	Scale   float64 // of the sample database: sample.Mixed's scale (1 is about 1 GB)
	Jobs    int
	Codec   codec.Codec
	Version string
	Out     io.Writer
}

// Run starts a cluster, runs the comparison and removes everything again.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	fmt.Fprintf(out, "starting a throwaway PostgreSQL cluster...\n")
	c, err := pgctl.Start(ctx, pgctl.Options{})
	if err != nil {
		return fmt.Errorf("start demo cluster: %w", err)
	}
	defer c.Close()
	dir, err := tempfile.MkdirTemp("", tempfile.Demo)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(out, "PostgreSQL %d on port %d; loading sample data (3 tables of names, orders and logs, %.0f MB at scale %g, with keys, 10 indexes and a foreign key, plus other object kinds)...\n",
		c.Version(), c.Port(), 1000*opts.Scale, opts.Scale)
	if err := loadSample(ctx, c, opts.Scale, opts.Jobs); err != nil {
		return err
	}
	d := &demo{c: c, dir: dir, opts: opts}
	return d.compare(ctx)
}

type demo struct {
	c    *pgctl.Instance
	dir  string
	opts Options
}

// measured is one tool's dump and restore.
type measured struct {
	name          string
	dump, restore time.Duration
	// dumpBusy and restoreBusy are the share of the machine's cores busy
	// during each (servers included): what the tool leaves idle.
	dumpBusy, restoreBusy float64
	size                  int64
}

func (d *demo) compare(ctx context.Context) error {
	out := d.opts.Out
	ours, err := d.runPgsprint(ctx)
	if err != nil {
		return err
	}
	if err := d.check(ctx, "restored"); err != nil {
		return err
	}
	fmt.Fprintf(out, "verified: schema identical per pg_dump, every table's row count and content hash identical\n")
	peer, err := d.runPgDump(ctx)
	if err != nil {
		return err
	}
	if err := d.check(ctx, "restored_pg"); err != nil {
		return fmt.Errorf("pg_restore result: %w", err)
	}
	fmt.Fprintf(out, "\n%-28s %10s %10s %10s %12s   %s\n", "tool (jobs "+strconv.Itoa(d.opts.Jobs)+")", "dump", "restore", "total", "archive",
		"cores busy ("+strconv.Itoa(runtime.NumCPU())+"): dump, restore")
	for _, m := range []measured{ours, peer} {
		fmt.Fprintf(out, "%-28s %9.2fs %9.2fs %9.2fs %9.1f MiB   %3.0f%%, %3.0f%%\n", m.name, m.dump.Seconds(), m.restore.Seconds(),
			(m.dump + m.restore).Seconds(), float64(m.size)/(1<<20), 100*m.dumpBusy, 100*m.restoreBusy)
	}
	fmt.Fprintf(out, "%-28s %9.2fx %9.2fx %9.2fx %11.2fx\n", "pg_dump time / pgsprint time",
		ratio(peer.dump, ours.dump), ratio(peer.restore, ours.restore), ratio(peer.dump+peer.restore, ours.dump+ours.restore),
		float64(peer.size)/float64(ours.size))
	fmt.Fprintf(out, "(pgsprint's restore also ANALYZEs every table, which pg_restore leaves to you; one run on a small sample, so expect noise)\n")
	return nil
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

// runPgsprint measures pgsprint: dump, then restore on -j connections.
func (d *demo) runPgsprint(ctx context.Context) (measured, error) {
	file := filepath.Join(d.dir, "sample.pgs")
	src, err := pgx.ParseConfig(d.c.ConnString("sample"))
	if err != nil {
		return measured{}, err
	}
	dst, err := pgx.ParseConfig(d.c.ConnString("restored"))
	if err != nil {
		return measured{}, err
	}
	return d.measure(ctx, "pgsprint ("+d.opts.Codec.Name()+")", "pgsprint", file, "restored",
		func() error {
			_, err := dump.Run(ctx, dump.Options{Source: src, File: file, Jobs: d.opts.Jobs, Codec: d.opts.Codec, Version: d.opts.Version})
			return err
		},
		func() error { return restoreFile(ctx, file, restore.Options{Target: dst, Jobs: d.opts.Jobs}) })
}

// measure times dumpTo writing file, then restoreInto loading the new
// database db, and prints the numbers: pgsprint and its peer are
// measured, and shown, in one way.
func (d *demo) measure(ctx context.Context, name, short, file, db string, dumpTo, restoreInto func() error) (measured, error) {
	m := measured{name: name}
	t, busy := time.Now(), progress.MachineBusy()
	if err := dumpTo(); err != nil {
		return m, err
	}
	m.dump = time.Since(t)
	m.dumpBusy = coresBusy(progress.MachineBusy()-busy, m.dump)
	st, err := os.Stat(file)
	if err != nil {
		return m, err
	}
	m.size = st.Size()
	if err := d.c.CreateDB(ctx, db); err != nil {
		return m, err
	}
	t, busy = time.Now(), progress.MachineBusy()
	if err := restoreInto(); err != nil {
		return m, err
	}
	m.restore = time.Since(t)
	m.restoreBusy = coresBusy(progress.MachineBusy()-busy, m.restore)
	fmt.Fprintf(d.opts.Out, "%s: dump %.2fs, restore %.2fs, archive %.1f MiB\n", short, m.dump.Seconds(), m.restore.Seconds(), float64(m.size)/(1<<20))
	return m, nil
}

// coresBusy is the share of the machine's cores that busy CPU time kept
// busy over wall.
func coresBusy(busy, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return busy.Seconds() / (wall.Seconds() * float64(runtime.NumCPU()))
}

// restoreFile restores the archive in the file at path.
func restoreFile(ctx context.Context, path string, opts restore.Options) error {
	b, err := location.Parse(path, location.Options{})
	if err != nil {
		return err
	}
	ar, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel})
	if err != nil {
		return err
	}
	defer ar.Close()
	opts.Where = ar.String()
	_, err = restore.Run(ctx, ar.Source, opts)
	return err
}

// runPgDump measures the peer: pg_dump -Fc then pg_restore -j N.
func (d *demo) runPgDump(ctx context.Context) (measured, error) {
	file := filepath.Join(d.dir, "sample.dump")
	bin := d.c.BinDir()
	return d.measure(ctx, "pg_dump -Fc / pg_restore -j", "pg_dump/pg_restore", file, "restored_pg",
		func() error {
			return run(ctx, filepath.Join(bin, "pg_dump"), "-Fc", "-f", file, "-d", d.c.ConnString("sample"))
		},
		func() error {
			return run(ctx, filepath.Join(bin, "pg_restore"), "--exit-on-error", "-j", strconv.Itoa(d.opts.Jobs), "-d", d.c.ConnString("restored_pg"), file)
		})
}

// check compares the sample database with a restored copy.
func (d *demo) check(ctx context.Context, db string) error {
	a, err := compare.SchemaDump(ctx, d.c.BinDir(), d.c.ConnString("sample"))
	if err != nil {
		return err
	}
	b, err := compare.SchemaDump(ctx, d.c.BinDir(), d.c.ConnString(db))
	if err != nil {
		return err
	}
	if diff := compare.SchemaDiff(a, b); diff != "" {
		return fmt.Errorf("schema of %s differs from the source:\n%s", db, diff)
	}
	fa, err := compare.Fingerprint(ctx, d.c.ConnString("sample"))
	if err != nil {
		return err
	}
	fb, err := compare.Fingerprint(ctx, d.c.ConnString(db))
	if err != nil {
		return err
	}
	if diff := compare.FingerprintDiff(fa, fb); len(diff) > 0 {
		return fmt.Errorf("data of %s differs from the source: %v", db, diff)
	}
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(name), err, out)
	}
	return nil
}

// loadSample builds the sample database: sample.Mixed's three tables
// (realistic text, keys, 10 secondary indexes) with a foreign key (every
// customer_id is a person of large_test_table), and a
// few object kinds they lack: an identity column, jsonb, a materialized
// view, a large object.
func loadSample(ctx context.Context, c *pgctl.Instance, scale float64, jobs int) error {
	if err := c.CreateDB(ctx, "sample"); err != nil {
		return err
	}
	if err := sample.Mixed(ctx, c.ConnString("sample"), scale, jobs); err != nil {
		return fmt.Errorf("load the sample: %w", err)
	}
	return c.Exec(ctx, "sample", `
ALTER TABLE orders ADD FOREIGN KEY (customer_id) REFERENCES large_test_table (id);
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL,
	kind text NOT NULL, payload jsonb);
INSERT INTO events (at, kind, payload)
	SELECT now() - i * interval '1 minute', (ARRAY['login','logout','buy'])[1 + i % 3],
		jsonb_build_object('n', i, 'tag', md5(i::text))
	FROM generate_series(1, 20000) i;
CREATE INDEX ON events (kind, at);
CREATE MATERIALIZED VIEW order_totals AS SELECT status, count(*) AS n, sum(total_amount) AS total FROM orders GROUP BY status;
SELECT lo_from_bytea(0, convert_to(repeat('pgsprint ', 100000), 'UTF8'));
ANALYZE;`)
}
