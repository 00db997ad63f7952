package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// progressFlags choose how a dump or restore shows progress and its summary.
type progressFlags struct {
	mode        string
	interval    time.Duration
	summaryJSON string
}

func (p *progressFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.mode, "progress", "auto", "progress on stderr: auto (bars on a terminal, else lines), bars, lines, json (one event per line) or none")
	fs.DurationVar(&p.interval, "progress-interval", 5*time.Second, "time between progress lines when stderr is not a terminal, and between json progress events")
	fs.StringVar(&p.summaryJSON, "summary-json", "", "write the end-of-run summary to this file as JSON")
}

// watch is one run's progress: the tracker the pipeline reports to and
// the display that shows it.
type watch struct {
	flags   progressFlags
	quiet   bool
	tracker *progress.Tracker
	display *progress.Display
	// reporter is what the pipeline reports to: the tracker, and the log
	// at -v.
	reporter progress.Reporter
}

// start checks the flags and starts showing progress (nothing with -q);
// with -v each phase and finished table is logged too.
func (p progressFlags) start(op string, l logFlags) (*watch, error) {
	quiet := l.quiet
	mode, err := progress.ParseMode(p.mode)
	if err != nil {
		return nil, usageError{err}
	}
	if p.interval <= 0 {
		return nil, usageError{fmt.Errorf("--progress-interval must be positive")}
	}
	if quiet {
		mode = progress.None
	}
	w := &watch{flags: p, quiet: quiet, tracker: progress.NewTracker(op)}
	w.reporter = w.tracker
	if l.verbose {
		w.reporter = progress.Logged(w.tracker, l.logger())
	}
	w.display = progress.Show(w.tracker, progress.Options{Mode: mode, Out: os.Stderr,
		Terminal: term.IsTerminal(int(os.Stderr.Fd())), Interval: p.interval})
	return w, nil
}

// stop ends the display, e.g. when the run failed.
func (w *watch) stop() { w.display.Stop() }

// finish prints the summary (as a JSON event with --progress=json) and
// writes --summary-json.
func (w *watch) finish(s progress.Summary) error {
	// The display stops first: a progress tick racing the summary could
	// otherwise be the last JSON event.
	w.display.Stop()
	w.tracker.Finish(&s)
	if !w.quiet && w.flags.mode != string(progress.JSON) {
		s.WriteText(os.Stderr)
	}
	if w.flags.summaryJSON != "" {
		return s.WriteJSON(w.flags.summaryJSON)
	}
	return nil
}

// finishServer ends a whole-server run: the summary of every database
// (serverSummary) as --summary-json and the JSON progress stream have it,
// and for people its totals and a line per database.
func (w *watch) finishServer(l logFlags, res *cluster.RestoreResult, target, verb string) error {
	err := w.finish(serverSummary(w.tracker, res, target))
	printServerResult(w.textOut(l), res, verb)
	return err
}

// textOut is where a run's summary lines for people go: nowhere with -q,
// nor with --progress=json, whose every line is one JSON event.
func (w *watch) textOut(l logFlags) io.Writer {
	if w.flags.mode == string(progress.JSON) {
		return io.Discard
	}
	return l.summaryOut()
}

// serverTarget is where a whole-server run put its n databases, as its
// summary line names it: the totals before it are the whole server's, not
// those of the database it connected to first.
func serverTarget(cfg *pgx.ConnConfig, n int) string {
	return fmt.Sprintf("%d databases (totals) on %s:%d as %q", n, cfg.Host, cfg.Port, cfg.User)
}

// serverSummary is the end-of-run summary of restore --all and clone
// --all: their totals, the globals, and each database with its phases.
func serverSummary(t *progress.Tracker, res *cluster.RestoreResult, target string) progress.Summary {
	s := t.Summary()
	s.Target, s.WallSeconds, s.Phases = target, res.Elapsed.Seconds(), nil
	s.Tables, s.Chunks, s.Rows, s.Sequences, s.LargeObj = 0, 0, 0, 0, 0
	if g := res.Globals; g != nil {
		s.Globals = &progress.GlobalsSummary{Roles: g.Roles, Tablespaces: g.Tablespaces, KeptRoles: g.KeptRoles}
	}
	s.Databases = []progress.DatabaseSummary{}
	for _, d := range res.Databases {
		if d.Skipped {
			s.Databases = append(s.Databases, progress.DatabaseSummary{Name: d.Name, Done: true})
			continue
		}
		one := restoreSummary(t, d.Result)
		s.CopyFormat = archive.JoinCopyFormats(s.CopyFormat, d.CopyFormat)
		s.Tables += d.Tables
		s.Chunks += d.Chunks
		s.Rows += d.Rows
		s.Sequences += d.Sequences
		s.LargeObj += d.LargeObjects
		s.Databases = append(s.Databases, progress.DatabaseSummary{Name: d.Name, WallSeconds: one.WallSeconds, Tables: d.Tables, Chunks: d.Chunks,
			Rows: d.Rows, Sequences: d.Sequences, LargeObj: d.LargeObjects, Resumed: d.Resumed, Phases: one.Phases})
	}
	return s
}
