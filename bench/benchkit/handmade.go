package benchkit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// The hand-made restore is the second peer of a restore (issue 43): what a
// DBA does with the same N connections and no tool. HandPrepare, untimed,
// writes what the DBA starts from: pg_dump's pre-data and post-data SQL,
// and every table's rows as COPY text files, large tables in N parts.
// HandRestore, the timed part, runs the pre-data, loads every file with
// COPY FROM on N connections largest first into tables without indexes,
// builds every index and primary key N at once largest table first, then
// the rest of the post-data (partition index attachments, triggers), then
// the foreign keys N at once, then vacuumdb -Z -j N.

// handFile is one data file of a hand-made restore.
type handFile struct {
	Path string `json:"path"`
	Copy string `json:"copy"` // its COPY ... FROM STDIN
	Size int64  `json:"size"`
}

// handPlan is what HandPrepare writes for HandRestore (plan.json).
type handPlan struct {
	Files []handFile `json:"files"`
	// Tables is the size of the table each index and constraint of the
	// post-data is on, by "schema.name" as pg_dump's TOC headers name
	// them: the largest are built first.
	Tables map[string]int64 `json:"tables"`
	// Sequences set every sequence where the source's is (pg_dump's data
	// section does it; the hand-made restore has no such section).
	Sequences []string `json:"sequences"`
}

// HandPrepare writes the hand-made restore's starting point for the
// database at connString into dir, with pg_dump from binDir.
func HandPrepare(ctx context.Context, binDir, connString, dir string, jobs int) error {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	for _, section := range []string{"pre-data", "post-data"} {
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "pg_dump"), "--section="+section,
			"-f", filepath.Join(dir, section+".sql"), "-d", connString).CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_dump --section=%s: %v: %s", section, err, out)
		}
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return err
	}
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		return err
	}
	tables, err := pg.ListTables(ctx, conn, srv)
	if err != nil {
		return err
	}
	plan := handPlan{Tables: map[string]int64{}}
	for _, t := range tables {
		chunks, err := chunk.Split(ctx, conn, srv, t, chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto, Jobs: jobs})
		if err != nil {
			return err
		}
		at := archive.Table{Schema: t.Schema, Name: t.Name, Columns: t.Columns}
		from := pg.Copy{Schema: t.Schema, Table: t.Name, Columns: t.Columns}.From()
		for _, c := range chunks {
			path := filepath.Join(dir, "data", strconv.Itoa(len(plan.Files)))
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			_, err = conn.PgConn().CopyTo(ctx, f, dump.CopyOutSQL(at, archive.Chunk{Where: c.Where}, srv.Encoding))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("copy %s.%s: %w", t.Schema, t.Name, err)
			}
			info, err := os.Stat(path)
			if err != nil {
				return err
			}
			plan.Files = append(plan.Files, handFile{Path: path, Copy: from, Size: info.Size()})
		}
	}
	// Every index and constraint, by the name pg_dump's headers give it,
	// with its table's size.
	rows, err := conn.Query(ctx, `SELECT n.nspname || '.' || c.relname, pg_total_relation_size(t.oid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		UNION ALL
		SELECT n.nspname || '.' || t.relname || ' ' || o.conname, pg_total_relation_size(t.oid)
		FROM pg_constraint o JOIN pg_class t ON t.oid = o.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return err
		}
		plan.Tables[name] = size
	}
	if err := rows.Err(); err != nil {
		return err
	}
	seqs, err := conn.Query(ctx, `SELECT format('SELECT pg_catalog.setval(%L, %s, true)', quote_ident(schemaname) || '.' || quote_ident(sequencename), last_value)
		FROM pg_sequences WHERE last_value IS NOT NULL`)
	if err != nil {
		return err
	}
	if plan.Sequences, err = pgx.CollectRows(seqs, pgx.RowTo[string]); err != nil {
		return err
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "plan.json"), b, 0o644)
}

// postEntry is one TOC entry of pg_dump's plain post-data SQL.
type postEntry struct {
	kind string // the header's Type: INDEX, CONSTRAINT, FK CONSTRAINT, ...
	name string // schema.name as the plan's Tables key it
	sql  string
}

// parsePost splits pg_dump's plain SQL into its preamble (the session
// settings before the first entry) and its entries, by the
// "-- Name: N; Type: T; Schema: S; Owner: O" headers; psql's
// meta-commands (\restrict) are left out.
func parsePost(text string) (preamble string, entries []postEntry) {
	var cur *postEntry
	var pre strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `\`) {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "-- Name: "); ok {
			name, tail, _ := strings.Cut(rest, "; Type: ")
			kind, tail, _ := strings.Cut(tail, "; Schema: ")
			schema, _, _ := strings.Cut(tail, "; Owner: ")
			entries = append(entries, postEntry{kind: kind, name: schema + "." + name})
			cur = &entries[len(entries)-1]
			continue
		}
		if cur == nil {
			pre.WriteString(line + "\n")
		} else {
			cur.sql += line + "\n"
		}
	}
	return pre.String(), entries
}

// HandRestore is the timed hand-made restore into connString from dir
// (HandPrepare's), on jobs connections, then vacuumdb from binDir.
func HandRestore(ctx context.Context, binDir, connString, dir string, jobs int) error {
	var plan handPlan
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		return err
	}
	preData, err := os.ReadFile(filepath.Join(dir, "pre-data.sql"))
	if err != nil {
		return err
	}
	postData, err := os.ReadFile(filepath.Join(dir, "post-data.sql"))
	if err != nil {
		return err
	}
	preamble, pre := parsePost(string(preData))
	var preSQL strings.Builder
	preSQL.WriteString(preamble)
	for _, e := range pre {
		preSQL.WriteString(e.sql)
	}
	if err := onConns(ctx, connString, 1, "", []string{preSQL.String()}); err != nil {
		return fmt.Errorf("pre-data: %w", err)
	}
	slices.SortFunc(plan.Files, func(a, b handFile) int { return cmp.Compare(b.Size, a.Size) })
	if err := pool(ctx, connString, jobs, "", plan.Files, func(ctx context.Context, conn *pgx.Conn, f handFile) error {
		file, err := os.Open(f.Path)
		if err != nil {
			return err
		}
		defer file.Close()
		_, err = conn.PgConn().CopyFrom(ctx, file, f.Copy)
		return err
	}); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	preamble, post := parsePost(string(postData))
	if err := onConns(ctx, connString, 1, "", plan.Sequences); err != nil {
		return fmt.Errorf("sequences: %w", err)
	}
	size := func(e postEntry) int64 { return plan.Tables[e.name] }
	var keys, fks, rest []postEntry
	for _, e := range post {
		switch e.kind {
		case "INDEX", "CONSTRAINT":
			keys = append(keys, e)
		case "FK CONSTRAINT":
			fks = append(fks, e)
		default:
			rest = append(rest, e)
		}
	}
	largest := func(a, b postEntry) int { return cmp.Compare(size(b), size(a)) }
	slices.SortStableFunc(keys, largest)
	slices.SortStableFunc(fks, largest)
	sqlOf := func(es []postEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.sql
		}
		return out
	}
	if err := onConns(ctx, connString, jobs, preamble, sqlOf(keys)); err != nil {
		return fmt.Errorf("indexes: %w", err)
	}
	if err := onConns(ctx, connString, 1, preamble, sqlOf(rest)); err != nil {
		return fmt.Errorf("post-data: %w", err)
	}
	if err := onConns(ctx, connString, jobs, preamble, sqlOf(fks)); err != nil {
		return fmt.Errorf("foreign keys: %w", err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "vacuumdb"), "--analyze-only", "--quiet",
		"-j", strconv.Itoa(jobs), "-d", connString).CombinedOutput()
	if err != nil {
		return fmt.Errorf("vacuumdb: %v: %s", err, out)
	}
	return nil
}

// onConns runs each statement text (which may hold several statements)
// on one of jobs connections, each set up with preamble first.
func onConns(ctx context.Context, connString string, jobs int, preamble string, stmts []string) error {
	return pool(ctx, connString, jobs, preamble, stmts, func(ctx context.Context, conn *pgx.Conn, s string) error {
		_, err := conn.Exec(ctx, s)
		return err
	})
}

// pool runs do for every item on jobs connections, in the items' order.
func pool[T any](ctx context.Context, connString string, jobs int, preamble string, items []T, do func(context.Context, *pgx.Conn, T) error) error {
	if len(items) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	queue := make(chan T)
	g.Go(func() error {
		defer close(queue)
		for _, it := range items {
			select {
			case queue <- it:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range min(max(jobs, 1), len(items)) {
		g.Go(func() error {
			conn, err := pgx.Connect(gctx, connString)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			if strings.TrimSpace(preamble) != "" {
				if _, err := conn.Exec(gctx, preamble); err != nil {
					return err
				}
			}
			for it := range queue {
				if err := do(gctx, conn, it); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// HandSubcommand is the hidden subcommand a benchmark program measures as
// the hand-made restore's own process: "PROGRAM handmade BINDIR
// CONNSTRING DIR JOBS". Called first in main, it runs that and exits when
// args ask for it, and returns otherwise.
func HandSubcommand(ctx context.Context, args []string) {
	if len(args) < 2 || args[1] != "handmade" {
		return
	}
	err := fmt.Errorf("usage: handmade BINDIR CONNSTRING DIR JOBS")
	if len(args) == 6 {
		var jobs int
		if jobs, err = strconv.Atoi(args[5]); err == nil {
			err = HandRestore(ctx, args[2], args[3], args[4], jobs)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "handmade:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
