package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/internal/chunk"
)

// step is one measured command of a round: a dump, or a restore or clone
// into a fresh target database that is checked against the source.
type step struct {
	key    string // the -steps name and the row's identity with -j
	name   string // the row's label
	target bool   // restores into a fresh database, verified and dropped after
	// cmds is the command, or a writer and a reader joined by a pipe.
	cmds func(dst string) []benchkit.Command
	// output is the path whose size is the bytes written, or "".
	output string
	// peers are the steps (keys at the same -j) this one replaces: its
	// ratios are taken against their medians added up.
	peers []string
	// also are the other peers its ratios are taken against, each alone
	// (the hand-made restore beside pg_restore's).
	also []string
	// prepare is a directory HandPrepare fills, untimed, before the
	// step's first round; "" for none.
	prepare string
	// etaLog is the JSON progress log of the pgsprint whose ETA is
	// checked against the run's real end, or "".
	etaLog string
}

// steps are the commands of one round at -j jobs, in the order they run.
// Restores read the archives that the dumps before them in the round
// wrote.
func (e *env) steps(src *source, jobs, round int, first bool) []step {
	j := strconv.Itoa(jobs)
	conn := e.srv.ConnString(src.db)
	bin := func(name string) string { return filepath.Join(e.srv.BinDir(), name) }
	file := filepath.Join(e.work, "pgsprint.pgs")
	dir := filepath.Join(e.work, "pgdump.dir")
	log := func(what string) string {
		return filepath.Join(e.cfg.out, fmt.Sprintf("%s-%s-j%s-r%d.log", src.key, what, j, round))
	}
	// pgsprint's rows log JSON progress events: what the ETA said along
	// the way, against when the command really ended. Every second, so
	// that the event nearest half a 14-second run is at half of it (at
	// 10 s, the one event of such a run was at 70%).
	progress := []string{"--progress=json", "--progress-interval=1s"}
	pgsprint := func(what string, args ...string) benchkit.Command {
		return benchkit.Command{Args: append(append([]string{e.pgsprint}, args...), progress...), Log: log(what)}
	}
	var out []step
	add := func(s step) {
		if e.cfg.steps[s.key] {
			out = append(out, s)
		}
	}
	if src.schemaSteps() {
		// Thousands of tiny tables: the schema pass is the floor, and
		// the dump's data should hide behind it.
		schema := filepath.Join(e.work, "pgdump-schema.fc")
		add(step{key: "pgdump-schema", name: "pg_dump --schema-only -Fc", output: schema,
			cmds: one(benchkit.Cmd(bin("pg_dump"), "--schema-only", "-Fc", "-f", schema, "-d", conn))})
		add(step{key: "dump", name: "pgsprint dump -j" + j, output: file, peers: []string{"pgdump-schema"}, etaLog: log("dump"),
			cmds: one(pgsprint("dump", "dump", "-j", j, "-f", file, "-d", conn))})
		return out
	}
	add(step{key: "raw", name: "raw COPY limit -j" + j,
		cmds: one(benchkit.Cmd(append([]string{e.self}, benchkit.RawCopyArgs(conn, jobs, chunk.DefaultSize)...)...))})
	add(step{key: "dump", name: "pgsprint dump -j" + j, output: file, peers: []string{"raw"}, etaLog: log("dump"),
		cmds: one(pgsprint("dump", "dump", "-j", j, "-f", file, "-d", conn))})
	add(step{key: "pgdump-fd", name: "pg_dump -Fd -j" + j, output: dir,
		cmds: one(benchkit.Cmd("sh", "-c", `rm -rf "$1" && exec "$0" -Fd -j "$2" -f "$1" -d "$3"`, bin("pg_dump"), dir, j, conn))})
	if first {
		fc := filepath.Join(e.work, "pgdump.fc")
		add(step{key: "pgdump-fc", name: "pg_dump -Fc", output: fc,
			cmds: one(benchkit.Cmd(bin("pg_dump"), "-Fc", "-f", fc, "-d", conn))})
	}
	add(step{key: "restore", name: "pgsprint restore -j" + j, target: true, peers: []string{"pgrestore"}, also: []string{"handmade"}, etaLog: log("restore"),
		cmds: func(dst string) []benchkit.Command {
			return []benchkit.Command{pgsprint("restore", "restore", "-j", j, "-f", file, "-d", e.srv.ConnString(dst))}
		}})
	add(step{key: "pgrestore", name: "pg_restore -j" + j + " + vacuumdb -Z -j" + j, target: true,
		cmds: func(dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd("sh", "-c", `"$0" -j "$1" -d "$2" "$3" && exec "$4" --analyze-only --quiet -j "$1" -d "$2"`,
				bin("pg_restore"), j, e.srv.ConnString(dst), dir, bin("vacuumdb"))}
		}})
	add(step{key: "pipe", name: "pgsprint dump -j" + j + " → pipe → restore", target: true, peers: []string{"pgdump-fd", "pgrestore"}, etaLog: log("pipe-restore"),
		cmds: func(dst string) []benchkit.Command {
			return []benchkit.Command{
				pgsprint("pipe-dump", "dump", "-j", j, "-f", "-", "-d", conn),
				pgsprint("pipe-restore", "restore", "-j", j, "-f", "-", "-d", e.srv.ConnString(dst)),
			}
		}})
	add(step{key: "handmade", name: "hand-made restore -j" + j + " + vacuumdb -Z -j" + j, target: true, prepare: e.handDir(src, jobs),
		cmds: func(dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd(e.self, "handmade", e.srv.BinDir(), e.srv.ConnString(dst), e.handDir(src, jobs), j)}
		}})
	clonePeers := []string{"pgdump-fd", "pgrestore"}
	if e.pgcopydb != "" {
		clonePeers = []string{"pgcopydb"}
		work := filepath.Join(e.work, "pgcopydb")
		add(step{key: "pgcopydb", name: "pgcopydb clone --table-jobs " + j + " --index-jobs " + j, target: true,
			cmds: func(dst string) []benchkit.Command {
				return []benchkit.Command{benchkit.Cmd(e.pgcopydb, "clone", "--source", conn, "--target", e.srv.ConnString(dst),
					"--table-jobs", j, "--index-jobs", j, "--split-tables-larger-than", "100MB", "--dir", work, "--restart")}
			}})
	}
	add(step{key: "clone", name: "pgsprint clone -j" + j, target: true, peers: clonePeers, etaLog: log("clone"),
		cmds: func(dst string) []benchkit.Command {
			return []benchkit.Command{pgsprint("clone", "clone", "-j", j, "--source", conn, "--target", e.srv.ConnString(dst))}
		}})
	if e.s3 != nil && e.cfg.steps["s3"] {
		loc, onDisk := e.s3.Location(file)
		withS3 := func(c benchkit.Command) benchkit.Command { c.Env = e.s3.Env(); return c }
		out = append(out,
			step{key: "s3-dump", name: "pgsprint dump -j" + j + " → s3://", output: onDisk, peers: []string{"dump"},
				cmds: one(withS3(pgsprint("s3-dump", "dump", "-j", j, "--overwrite", "-f", loc, "-d", conn)))},
			step{key: "s3-restore", name: "pgsprint restore -j" + j + " ← s3://", target: true, peers: []string{"restore"},
				cmds: func(dst string) []benchkit.Command {
					return []benchkit.Command{withS3(pgsprint("s3-restore", "restore", "-j", j, "-f", loc, "-d", e.srv.ConnString(dst)))}
				}})
	}
	return out
}

// handDir is where the hand-made restore's files of src at -j jobs are.
func (e *env) handDir(src *source, jobs int) string {
	return filepath.Join(e.work, fmt.Sprintf("handmade-j%d", jobs))
}

// one is a step's command that takes no target.
func one(c benchkit.Command) func(string) []benchkit.Command {
	return func(string) []benchkit.Command { return []benchkit.Command{c} }
}

// measure runs every step -rounds times, interleaved, and returns one row
// per step and -j.
func (e *env) measure(ctx context.Context, src *source) ([]*row, error) {
	if e.s3 == nil && e.cfg.steps["s3"] {
		fmt.Fprintf(os.Stderr, "%s: s3 rows skipped: %s\n", src.label, e.s3Skip)
	}
	// Warm the cache the same way for every tool: one untimed full read.
	warm := benchkit.Cmd(append([]string{e.self}, benchkit.RawCopyArgs(e.srv.ConnString(src.db), 2, chunk.DefaultSize)...)...)
	if r := benchkit.Run(ctx, "warm-up", warm, nil); r.Err != nil {
		return nil, r.Err
	}
	var rows []*row
	byKey := map[string]*row{}
	// A run cut short (interrupted, or a step's setup failing) still
	// returns the rows measured so far, linked to their peers, so that
	// the caller can print them beside the error.
	var err error
rounds:
	for round := 1; round <= e.cfg.rounds; round++ {
		for ji, jobs := range e.cfg.jobs {
			for _, s := range e.steps(src, jobs, round, ji == 0) {
				id := fmt.Sprintf("%s/%d", s.key, jobs)
				r := byKey[id]
				if r == nil {
					r = &row{dataset: src, jobs: jobs}
					byKey[id] = r
					rows = append(rows, r)
				}
				// This round's commands and logs: each round writes its own
				// log (-rN), whose ETA is checked against its own wall time
				// (round 1's, kept, had every round's events appended).
				r.step = s
				verify := e.cfg.verify == "all" || (e.cfg.verify == "first" && round == 1 && ji == 0)
				if err = e.once(ctx, src, r, round, verify); err != nil {
					break rounds
				}
			}
		}
	}
	for _, r := range rows {
		for _, p := range r.step.peers {
			if peer := byKey[fmt.Sprintf("%s/%d", p, r.jobs)]; peer != nil {
				r.peers = append(r.peers, peer)
			}
		}
		for _, p := range r.step.also {
			if peer := byKey[fmt.Sprintf("%s/%d", p, r.jobs)]; peer != nil {
				r.also = append(r.also, peer)
			}
		}
	}
	return rows, err
}

// once runs a row's step one time: into a fresh database when it restores,
// after a checkpoint so that it does not pay for the step before.
func (e *env) once(ctx context.Context, src *source, r *row, round int, verify bool) error {
	dst := src.db + "_copy"
	if r.step.target {
		if err := e.createDB(ctx, dst); err != nil {
			return err
		}
	}
	if p := r.step.prepare; p != "" {
		if _, err := os.Stat(filepath.Join(p, "plan.json")); err != nil {
			fmt.Fprintf(os.Stderr, "%s: writing the hand-made restore's files (untimed)...\n", src.label)
			if err := benchkit.HandPrepare(ctx, e.srv.BinDir(), e.srv.ConnString(src.db), p, r.jobs); err != nil {
				return fmt.Errorf("hand-made restore's files: %w", err)
			}
		}
	}
	if err := e.checkpoint(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: round %d: %s...\n", src.label, round, r.step.name)
	cctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	cmds := r.step.cmds(dst)
	var res benchkit.Result
	err := e.traced(ctx, src, r, round, func() {
		if len(cmds) == 2 {
			res, _, _ = benchkit.Pipeline(cctx, r.step.name, cmds[0], cmds[1])
		} else {
			res = benchkit.Run(cctx, r.step.name, cmds[0], nil)
		}
	})
	if err != nil {
		return err
	}
	if res.Err == nil && r.step.output != "" {
		size, err := benchkit.DiskSize(r.step.output)
		if err != nil {
			return err
		}
		res.Size = size
	}
	if res.Err != nil {
		// Not a time: a step that failed or was interrupted is no
		// measurement, and its row says so.
		fmt.Fprintf(os.Stderr, "%s: round %d: %s: failed after %.1f s: %v\n", src.label, round, r.step.name, res.Wall.Seconds(), res.Err)
	} else {
		fmt.Fprintf(os.Stderr, "%s: round %d: %s: %.1f s\n", src.label, round, r.step.name, res.Wall.Seconds())
	}
	r.results = append(r.results, res)
	if res.Err == nil && r.step.etaLog != "" {
		if c, err := checkETA(r.step.etaLog, res.Wall.Seconds()); err == nil {
			r.etas = append(r.etas, c)
		}
	}
	if res.Err == nil && r.step.target && verify && src.rows != nil {
		start := time.Now()
		if d := e.verify(ctx, src, dst); d != "" {
			r.differs = d
		}
		r.verified++
		fmt.Fprintf(os.Stderr, "%s: %s verified in %s\n", src.label, r.step.name, time.Since(start).Round(time.Second))
	}
	if r.step.target {
		return e.dropDB(ctx, dst)
	}
	return nil
}
