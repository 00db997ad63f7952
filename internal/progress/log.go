package progress

import (
	"log/slog"
	"time"
)

// Logged returns a Reporter that passes everything to r and logs it too:
// each phase and the plan at Info, each finished table chunk, large
// object or restore step at Debug. This is what -v shows: pgsprint's
// logger is at Warn without it, so the default output does not change.
func Logged(r Reporter, log *slog.Logger) Reporter {
	if log == nil {
		return r
	}
	return logged{r: r, log: log}
}

type logged struct {
	r   Reporter
	log *slog.Logger
}

// Begin implements Reporter.
func (l logged) Begin(p Expected) {
	l.log.Info("planned", "op", p.Op, "tables", p.Tables, "chunks", p.Chunks, "bytes", p.Bytes, "rows", p.Rows)
	l.r.Begin(p)
}

// Phase implements Reporter.
func (l logged) Phase(name string) {
	l.log.Info("phase", "phase", name)
	l.r.Phase(name)
}

// Steps implements Reporter.
func (l logged) Steps(n int) { l.r.Steps(n) }

// Start implements Reporter.
func (l logged) Start(w Work) { l.r.Start(w) }

// Add implements Reporter.
func (l logged) Add(bytes, rows int64) { l.r.Add(bytes, rows) }

// Done implements Reporter.
func (l logged) Done(w Work, d Done) {
	switch {
	case w.Kind == "data" && w.Name != w.Table:
		l.log.Debug("data done", "table", w.Table, "part", w.Name, "rows", d.Rows, "bytes", d.Bytes, "elapsed", d.Elapsed.Round(time.Millisecond))
	case w.Kind == "data":
		l.log.Debug("data done", "table", w.Table, "rows", d.Rows, "bytes", d.Bytes, "elapsed", d.Elapsed.Round(time.Millisecond))
	default:
		l.log.Debug(w.Kind+" done", "name", w.Name, "elapsed", d.Elapsed.Round(time.Millisecond))
	}
	l.r.Done(w, d)
}
