package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
)

// row is one step at one -j on one dataset, with every round's result.
type row struct {
	dataset  *source
	step     step
	jobs     int
	results  []benchkit.Result
	peers    []*row // what the step replaces, at the same -j
	also     []*row // other peers, each alone (step.also)
	verified int    // rounds whose target was compared with the source
	differs  string // the first difference a comparison found
	etas     []etaCheck
	trace    *benchkit.TraceTotals // with -trace: what pg_stat_activity showed
}

// spread is a figure's minimum, median and maximum over the rounds.
type spread struct{ min, med, max float64 }

// spreadOf is the spread of f over the rows' successful results; ok is
// false when none succeeded.
func (r *row) spreadOf(f func(benchkit.Result) float64) (spread, bool) {
	var v []float64
	for _, res := range r.results {
		if res.Err == nil {
			v = append(v, f(res))
		}
	}
	if len(v) == 0 {
		return spread{}, false
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return spread{v[0], med, v[len(v)-1]}, true
}

func wallOf(r benchkit.Result) float64    { return r.Wall.Seconds() }
func cpuOf(r benchkit.Result) float64     { return r.CPU.Seconds() }
func machineOf(r benchkit.Result) float64 { return r.Machine.Seconds() }
func sizeOf(r benchkit.Result) float64    { return float64(r.Size) }

// busy is how much of the machine's cores the median run kept busy:
// machine CPU-seconds / cores / wall.
func (r *row) busy() (float64, bool) {
	w, ok := r.spreadOf(wallOf)
	m, _ := r.spreadOf(machineOf)
	if !ok || w.med == 0 || m.med == 0 {
		return 0, false
	}
	return m.med / (w.med * float64(runtime.NumCPU())), true
}

// peakRSS is the largest own peak RSS (VmHWM) of any round, in bytes: the
// process's own, not its children's (pg_dump, pg_restore).
func (r *row) peakRSS() int64 {
	var p int64
	for _, res := range r.results {
		p = max(p, res.OwnRSS)
	}
	return p
}

// failure is the first round's error, or "".
func (r *row) failure() string {
	for _, res := range r.results {
		if res.Err != nil {
			return res.Err.Error()
		}
	}
	return ""
}

// against is the median of f summed over the peers divided by this row's:
// above 1 when this row is faster (or cheaper) than what it replaces.
func (r *row) against(f func(benchkit.Result) float64) (float64, bool) {
	own, ok := r.spreadOf(f)
	if !ok || own.med == 0 || len(r.peers) == 0 {
		return 0, false
	}
	var sum float64
	for _, p := range r.peers {
		s, ok := p.spreadOf(f)
		if !ok {
			return 0, false
		}
		sum += s.med
	}
	return sum / own.med, true
}

// peerName names the rows a ratio is taken against.
func (r *row) peerName() string {
	names := make([]string, len(r.peers))
	for i, p := range r.peers {
		names[i] = p.step.name
	}
	return strings.Join(names, " + ")
}

// printTable writes one dataset's rows as a Markdown table, then the
// ratios against each row's peers and the seeds' figures beside ours.
func printTable(w io.Writer, src *source, rows []*row) {
	fmt.Fprintf(w, "\n### %s (%.1f GiB)\n\n", src.label, src.GiB())
	fmt.Fprintln(w, "| step | wall s (min / median / max) | client CPU s | machine CPU s | cores busy | own peak RSS MiB | written MiB | s per GiB | verified |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		wall, ok := r.spreadOf(wallOf)
		if !ok {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | | | |\n", r.step.name, strings.ReplaceAll(r.failure(), "|", "/"))
			continue
		}
		cpu, _ := r.spreadOf(cpuOf)
		mach, _ := r.spreadOf(machineOf)
		size, _ := r.spreadOf(sizeOf)
		busy, _ := r.busy()
		fmt.Fprintf(w, "| %s | %.1f / **%.1f** / %.1f | %.1f | %.1f | %.0f%% | %.0f | %s | %.1f | %s |\n",
			r.step.name, wall.min, wall.med, wall.max, cpu.med, mach.med, 100*busy, float64(r.peakRSS())/(1<<20),
			mib(size.med), wall.med/src.GiB(), r.verdict())
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		if wall, ok := r.against(wallOf); ok {
			mach, _ := r.against(machineOf)
			fmt.Fprintf(w, "- %s against %s: %.2fx the speed, %.2fx the machine CPU\n", r.step.name, r.peerName(), wall, 1/mach)
		}
	}
	for _, r := range rows {
		for _, p := range r.also {
			alone := &row{results: r.results, peers: []*row{p}}
			if wall, ok := alone.against(wallOf); ok {
				mach, _ := alone.against(machineOf)
				fmt.Fprintf(w, "- %s against %s: %.2fx the speed, %.2fx the machine CPU\n", r.step.name, p.step.name, wall, 1/mach)
			}
		}
	}
	for _, r := range rows {
		if busy, ok := r.busy(); ok && r.step.target {
			fmt.Fprintf(w, "- cores busy during %s: %.0f%% of %d\n", r.step.name, 100*busy, runtime.NumCPU())
		}
	}
	for _, r := range rows {
		for i, c := range r.etas {
			fmt.Fprintf(w, "- ETA of %s, run %d: %s\n", r.step.name, i+1, c)
		}
	}
	for _, s := range seedsFor(src, rows) {
		fmt.Fprintln(w, "- "+s)
	}
	printTrace(w, rows)
}

// etaHalfError is the median over the rounds of the ETA's error at half
// the run (etaCheck.halfError).
func (r *row) etaHalfError() (float64, bool) {
	var v []float64
	for _, c := range r.etas {
		if e, ok := c.halfError(); ok {
			v = append(v, e)
		}
	}
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	return v[len(v)/2], true
}

// verdict says whether the row's restores matched their source.
func (r *row) verdict() string {
	switch {
	case !r.step.target:
		return ""
	case r.differs != "":
		return "**differs**: " + strings.ReplaceAll(r.differs, "|", "/")
	case r.verified > 0:
		return fmt.Sprintf("same (%d of %d)", r.verified, len(r.results))
	}
	return "not checked"
}

func mib(b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f", b/(1<<20))
}

// writeResults writes every row to dir/results.csv, one line per row with
// its spreads, for the docs' tables and for comparing runs.
func writeResults(dir string, rows []*row) error {
	path := filepath.Join(dir, "results.csv")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	cw.Write([]string{"dataset", "gib", "cpus", "jobs", "step", "rounds", "wall_min_s", "wall_median_s", "wall_max_s",
		"client_cpu_s", "machine_cpu_s", "cores_busy", "own_peak_rss_mib", "written_bytes", "s_per_gib",
		"peer", "speed_vs_peer", "machine_cpu_vs_peer", "verified", "error", "eta_error_half",
		"trace_waits", "trace_work", "trace_busy_mean", "trace_below_jobs_s", "trace_at_most_one_s"})
	for _, r := range rows {
		num := func(v float64, ok bool) string {
			if !ok {
				return ""
			}
			return strconv.FormatFloat(v, 'f', 3, 64)
		}
		wall, ok := r.spreadOf(wallOf)
		cpu, _ := r.spreadOf(cpuOf)
		mach, _ := r.spreadOf(machineOf)
		size, _ := r.spreadOf(sizeOf)
		busy, bok := r.busy()
		speed, sok := r.against(wallOf)
		machVs, mok := r.against(machineOf)
		if mok {
			machVs = 1 / machVs
		}
		rec := append([]string{}, r.dataset.label, num(r.dataset.GiB(), true), strconv.Itoa(runtime.NumCPU()), strconv.Itoa(r.jobs),
			r.step.name, strconv.Itoa(len(r.results)), num(wall.min, ok), num(wall.med, ok), num(wall.max, ok),
			num(cpu.med, ok), num(mach.med, ok), num(busy, bok), strconv.FormatInt(r.peakRSS()>>20, 10),
			strconv.FormatFloat(size.med, 'f', 0, 64), num(wall.med/r.dataset.GiB(), ok),
			r.peerName(), num(speed, sok), num(machVs, mok), r.verdict(), r.failure(), num(r.etaHalfError()))
		if r.trace != nil {
			t := r.trace.Summary()
			rec = append(rec, t.WaitsLine(8), t.ClassesLine(8), num(t.BusyMean, true), num(t.BelowJobs, true), num(t.AtMostOne, true))
		} else {
			rec = append(rec, "", "", "", "", "")
		}
		cw.Write(rec)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := writeTraces(dir, rows); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "results: %s (finished %s)\n", path, time.Now().UTC().Format(time.RFC3339))
	return nil
}
