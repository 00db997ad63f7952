package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// bench measures every command on one database.
type bench struct {
	cfg     config
	bins    binaries
	cluster *pgtest.Instance
	db      string
	results []benchkit.Result
	server  []time.Duration // server CPU (all backends) of each result
}

func (b *bench) runAll(ctx context.Context) error {
	conn := b.cluster.ConnString(b.db)
	pgDump := filepath.Join(b.cluster.BinDir(), "pg_dump")
	chunk := strconv.FormatInt(b.cfg.chunkSize, 10)
	pgsprint := func(bin string, jobs int, extra ...string) benchkit.Command {
		args := []string{bin, "dump", "-d", conn, "-f", b.out("pgsprint.pgs"), "-j", strconv.Itoa(jobs), "-q", "--chunk-size", chunk}
		return benchkit.Cmd(append(args, extra...)...)
	}
	raw := func(jobs int) benchkit.Command {
		return benchkit.Cmd(append([]string{b.bins.self}, benchkit.RawCopyArgs(conn, jobs, b.cfg.chunkSize)...)...)
	}

	// Warm the cache the same way for everyone: one untimed full read.
	if r := benchkit.Run(ctx, "warm-up", raw(2), nil); r.Err != nil {
		return r.Err
	}
	for range max(b.cfg.rounds, 1) {
		b.round(ctx, conn, pgDump, pgsprint, raw)
	}
	b.keepFastest()
	return nil
}

// round runs every command once.
func (b *bench) round(ctx context.Context, conn, pgDump string, pgsprint func(string, int, ...string) benchkit.Command, raw func(int) benchkit.Command) {
	for _, j := range b.cfg.jobs {
		b.measure(ctx, fmt.Sprintf("raw limit -j%d", j), raw(j), "")
	}
	for _, j := range b.cfg.jobs {
		b.measure(ctx, fmt.Sprintf("pgsprint -j%d", j), pgsprint(b.bins.pgsprint, j), b.out("pgsprint.pgs"))
	}
	for _, spec := range b.cfg.codecs {
		b.measure(ctx, "pgsprint -j2 -Z "+spec, pgsprint(b.bins.pgsprint, 2, "-Z", spec), b.out("pgsprint.pgs"))
	}
	if b.bins.pgsprintPureGo != "" {
		b.measure(ctx, "pgsprint -j2 (pure Go zstd)", pgsprint(b.bins.pgsprintPureGo, 2), b.out("pgsprint.pgs"))
	}
	if b.cfg.rssJobs > 0 {
		j := b.cfg.rssJobs
		b.measure(ctx, fmt.Sprintf("pgsprint -j%d", j), pgsprint(b.bins.pgsprint, j), b.out("pgsprint.pgs"))
	}
	b.measure(ctx, baseline, benchkit.Cmd(pgDump, "-Fd", "-j2", "-d", conn, "-f", b.out("pgdump.dir")), b.out("pgdump.dir"))
	b.measure(ctx, "pg_dump -Fc", benchkit.Cmd(pgDump, "-Fc", "-d", conn, "-f", b.out("pgdump.fc")), b.out("pgdump.fc"))
}

// keepFastest reduces the rounds to one result per command: the fastest
// (others were slowed by whatever else ran), with the highest peak RSS
// seen, since memory is a bound and not a speed.
func (b *bench) keepFastest() {
	var out []benchkit.Result
	var server []time.Duration
	index := map[string]int{}
	for k, r := range b.results {
		i, seen := index[r.Name]
		switch {
		case !seen:
			index[r.Name] = len(out)
			out = append(out, r)
			server = append(server, b.server[k])
		case r.Err != nil:
			out[i].Err = r.Err
		default:
			rss := max(out[i].MaxRSS, r.MaxRSS)
			if r.Wall < out[i].Wall && out[i].Err == nil {
				out[i], server[i] = r, b.server[k]
			}
			out[i].MaxRSS = rss
		}
	}
	b.results, b.server = out, server
}

func (b *bench) out(name string) string { return filepath.Join(b.cfg.workDir, b.db+"."+name) }

// measure runs one command, records its result with the size of what it
// wrote (then removed, so runs do not fill the disk) and the server CPU
// all backends spent meanwhile.
func (b *bench) measure(ctx context.Context, name string, cmd benchkit.Command, output string) {
	fmt.Fprintf(os.Stderr, "%s: %s...\n", b.db, name)
	before, okBefore := b.serverCPU(ctx)
	r := benchkit.Run(ctx, name, cmd, nil)
	if output != "" {
		r.Size, _ = benchkit.DiskSize(output) // 0 when the command wrote nothing
		os.RemoveAll(output)
	}
	time.Sleep(200 * time.Millisecond) // let the postmaster reap the backends
	var server time.Duration
	if after, ok := b.serverCPU(ctx); ok && okBefore {
		server = after - before
	}
	b.results = append(b.results, r)
	b.server = append(b.server, server)
}

// serverCPU is the CPU time of the postmaster and every backend it has
// reaped (utime+stime+cutime+cstime of the postmaster in /proc).
func (b *bench) serverCPU(ctx context.Context) (time.Duration, bool) {
	conn, err := pgx.Connect(ctx, b.cluster.ConnString(b.db))
	if err != nil {
		return 0, false
	}
	var pid int
	err = conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
	conn.Close(ctx)
	if err != nil {
		return 0, false
	}
	stat := func(pid int) []string {
		s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		// Fields after the command name, which is in parentheses.
		return strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+2:]))
	}
	f := stat(pid)
	if len(f) < 15 {
		return 0, false
	}
	ppid, _ := strconv.Atoi(f[1])
	if f = stat(ppid); len(f) < 15 {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), true // USER_HZ is 100 on Linux
}

func (b *bench) find(name string) *benchkit.Result {
	for i := range b.results {
		if b.results[i].Name == name && b.results[i].Err == nil {
			return &b.results[i]
		}
	}
	return nil
}

// printTargets prints server CPU per run and the targets as
// measured in this run.
func (b *bench) printTargets(w io.Writer) {
	fmt.Fprintf(w, "\nserver CPU s (all backends, same runs):")
	for i, r := range b.results {
		fmt.Fprintf(w, " %s %.1f;", r.Name, b.server[i].Seconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\n| target | measured | goal |\n|---|---:|---|\n")
	base, fc := b.find(baseline), b.find("pg_dump -Fc")
	for _, j := range b.cfg.jobs {
		p, raw := b.find(fmt.Sprintf("pgsprint -j%d", j)), b.find(fmt.Sprintf("raw limit -j%d", j))
		if p == nil {
			continue
		}
		if base != nil {
			fmt.Fprintf(w, "| pgsprint -j%d speed vs %s | %.2fx | >= 3x |\n", j, baseline, base.Wall.Seconds()/p.Wall.Seconds())
		}
		if fc != nil && fc.Size > 0 {
			fmt.Fprintf(w, "| pgsprint -j%d size vs pg_dump -Fc | %.2fx | <= 1.1x |\n", j, float64(p.Size)/float64(fc.Size))
		}
		if raw != nil {
			fmt.Fprintf(w, "| pgsprint -j%d wall vs raw limit -j%d | %.2fx | <= 1.25x |\n", j, j, p.Wall.Seconds()/raw.Wall.Seconds())
		}
	}
	if j := b.cfg.rssJobs; j > 0 {
		if p := b.find(fmt.Sprintf("pgsprint -j%d", j)); p != nil {
			fmt.Fprintf(w, "| pgsprint -j%d peak RSS | %.0f MiB | < 256 MiB |\n", j, float64(p.MaxRSS)/(1<<20))
		}
	}
}
