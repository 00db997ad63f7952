package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pgsprint/pgsprint/bench/benchkit"
)

// traceFlag is -trace: the datasets whose every step is traced from
// pg_stat_activity (issue 43, "Where time goes"). Plain -trace traces
// them all; -trace=mixed,tpch only those.
type traceFlag struct {
	all  bool
	keys []string
}

// IsBoolFlag lets -trace stand alone, as a switch.
func (f *traceFlag) IsBoolFlag() bool { return true }

func (f *traceFlag) String() string {
	switch {
	case f == nil || (!f.all && len(f.keys) == 0):
		return ""
	case f.all:
		return "all"
	}
	return strings.Join(f.keys, ",")
}

func (f *traceFlag) Set(v string) error {
	*f = traceFlag{}
	switch v {
	case "true", "all":
		f.all = true
		return nil
	case "false", "none", "":
		return nil
	}
	for _, k := range splitList(v) {
		if _, ok := datasetNamed(k, config{}); !ok {
			return fmt.Errorf("unknown dataset %q (%s, or all)", k, datasetNames)
		}
		f.keys = append(f.keys, k)
	}
	return nil
}

// traces says whether the dataset with key is traced.
func (f traceFlag) traces(key string) bool { return f.all || slices.Contains(f.keys, key) }

// traced runs do while a tracer samples the server, and adds what it saw
// to the row; the raw samples go to a CSV in e.traceDir when there is
// one.
func (e *env) traced(ctx context.Context, src *source, r *row, round int, do func()) error {
	if !e.cfg.trace.traces(src.key) {
		do()
		return nil
	}
	t, err := benchkit.StartTracer(ctx, e.srv.ConnString("postgres"))
	if err != nil {
		return err
	}
	do()
	tr, err := t.Stop()
	if err != nil {
		return fmt.Errorf("%s: %s: %w", src.label, r.step.name, err)
	}
	if r.trace == nil {
		r.trace = benchkit.NewTraceTotals(r.jobs)
	}
	r.trace.Add(tr)
	if e.traceDir == "" {
		return nil
	}
	path := filepath.Join(e.traceDir, fmt.Sprintf("trace-%s-%s-j%d-r%d.csv", src.key, r.step.key, r.jobs, round))
	return tr.WriteCSV(path)
}

// printTrace writes the traced rows' summaries under their dataset's
// table: per step, the waits and the phases that took the server's
// backend-time, and how long fewer backends than -j were busy.
func printTrace(w io.Writer, rows []*row) {
	var traced []*row
	for _, r := range rows {
		if r.trace != nil {
			traced = append(traced, r)
		}
	}
	if len(traced) == 0 {
		return
	}
	fmt.Fprintf(w, "\n#### Where time goes (pg_stat_activity every %s)\n\n", benchkit.TraceInterval)
	fmt.Fprintln(w, "| step | waits (share of backend-time) | work (share of backend-time) | busy backends |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range traced {
		s := r.trace.Summary()
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.step.name, s.WaitsLine(5), s.ClassesLine(5), s.BusyLine())
	}
}

// traceRecord is one traced row in traces.json.
type traceRecord struct {
	Dataset string                `json:"dataset"`
	Step    string                `json:"step"`
	Jobs    int                   `json:"jobs"`
	Summary benchkit.TraceSummary `json:"summary"`
}

// writeTraces writes every traced row's summary to dir/traces.json, or
// nothing when no row was traced.
func writeTraces(dir string, rows []*row) error {
	var recs []traceRecord
	for _, r := range rows {
		if r.trace != nil {
			recs = append(recs, traceRecord{r.dataset.label, r.step.name, r.jobs, r.trace.Summary()})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "traces.json"), append(b, '\n'), 0o644)
}
