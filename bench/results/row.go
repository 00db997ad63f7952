// Package results holds the rows of the benchmark report and writes them
// out: a CSV with the columns of the published pg_dump comparison (plus
// client CPU and peak RSS), a Markdown table, and one self-contained HTML
// page with SVG bar charts of dump, restore and total time and of the size
// as a percentage of the database.
package results

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Row is one backup/restore pair (or one clone) of one dataset. The numbers
// are set only when the restore verified; otherwise Status says why not.
type Row struct {
	Dataset     string
	Tool        string // "pg_dump", "pgsprint", "pgsprint clone", "pgcopydb clone"
	Format      string // plain, custom, directory, tar; "pgsprint"; "clone"
	Compression string // none, gzip, lz4, zstd; "" for a clone
	Level       int    // 0 when the method has none

	BackupSeconds  float64 // 0 for a clone
	RestoreSeconds float64 // for a clone: the whole clone
	BackupBytes    int64   // 0 for a clone
	DatabaseBytes  int64   // pg_database_size of the source
	RestoredBytes  int64   // pg_database_size of the restored copy
	BackupCPU      float64 // client CPU seconds of the backup command
	RestoreCPU     float64 // client CPU seconds of the restore command(s)
	PeakRSS        int64   // bytes, the largest of all client processes

	// Status is StatusVerified, or "failed: ..." or "skipped: ...".
	Status string
}

// StatusVerified marks a row whose restore has the source's schema and rows.
const StatusVerified = "verified"

// OK reports whether the row's numbers are valid (the restore verified).
func (r Row) OK() bool { return r.Status == StatusVerified }

// Total is backup plus restore seconds.
func (r Row) Total() float64 { return r.BackupSeconds + r.RestoreSeconds }

// SizeRatio is the backup's size as a fraction of the database's.
func (r Row) SizeRatio() float64 {
	if r.DatabaseBytes == 0 {
		return 0
	}
	return float64(r.BackupBytes) / float64(r.DatabaseBytes)
}

// ClientCPU is the client CPU seconds of backup and restore together.
func (r Row) ClientCPU() float64 { return r.BackupCPU + r.RestoreCPU }

// IsClone reports whether the row is a direct copy without a backup file.
func (r Row) IsClone() bool { return r.Format == "clone" }

// Label names the row's variant within its dataset, e.g. "custom zstd:5"
// or "pgsprint lz4:1".
func (r Row) Label() string {
	switch {
	case r.IsClone():
		return r.Tool
	case r.Compression == "" || r.Compression == "none":
		return r.Format + " none"
	case r.Level == 0:
		return r.Format + " " + r.Compression
	default:
		return fmt.Sprintf("%s %s:%d", r.Format, r.Compression, r.Level)
	}
}

// Meta describes one run: where and with what it ran.
type Meta struct {
	Title     string
	Started   time.Time
	Duration  time.Duration
	Size      string // "quick", "full" or "custom"
	Scale     float64
	Jobs      int
	Machine   string // e.g. "2 CPUs, 23.4 GiB RAM, linux/amd64"
	Load      string // load average during the run, e.g. "min 1.2, mean 3.4, max 6.1"
	Server    string // the cluster's server version
	PgDump    string // the pg_dump version and directory used
	Datasets  map[string]string
	Notes     []string // one line each: skips, caveats
	Command   string   // how to rerun
	SortOrder []string // dataset order; datasets not listed follow by name
}

// datasets returns the distinct datasets of rows in the meta's order.
func (m Meta) datasets(rows []Row) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range m.SortOrder {
		for _, r := range rows {
			if r.Dataset == d && !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	var rest []string
	for _, r := range rows {
		if !seen[r.Dataset] {
			seen[r.Dataset] = true
			rest = append(rest, r.Dataset)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// of returns the rows of one dataset in their original order.
func of(rows []Row, dataset string) []Row {
	var out []Row
	for _, r := range rows {
		if r.Dataset == dataset {
			out = append(out, r)
		}
	}
	return out
}

// Pick is a recommendation: the verified row best at one need.
type Pick struct {
	Need string
	Row  Row
	Why  string
}

// Picks returns, for one dataset's rows, the fastest backup, the smallest
// file, the fastest restore and the fastest round trip among backups that
// verified, and the fastest pg_dump round trip for comparison.
func Picks(rows []Row) []Pick {
	best := func(need string, keep func(Row) bool, less func(a, b Row) bool, why func(Row) string) []Pick {
		var b *Row
		for i := range rows {
			r := rows[i]
			if !r.OK() || !keep(r) {
				continue
			}
			if b == nil || less(r, *b) {
				b = &rows[i]
			}
		}
		if b == nil {
			return nil
		}
		return []Pick{{Need: need, Row: *b, Why: why(*b)}}
	}
	file := func(r Row) bool { return !r.IsClone() }
	pgdump := func(r Row) bool { return r.Tool == "pg_dump" }
	secs := func(f func(Row) float64) func(Row) string {
		return func(r Row) string { return fmt.Sprintf("%.2f s", f(r)) }
	}
	var out []Pick
	out = append(out, best("fastest backup", file, func(a, b Row) bool { return a.BackupSeconds < b.BackupSeconds }, secs(func(r Row) float64 { return r.BackupSeconds }))...)
	out = append(out, best("smallest file", file, func(a, b Row) bool { return a.BackupBytes < b.BackupBytes },
		func(r Row) string { return fmt.Sprintf("%.1f%% of the database", 100*r.SizeRatio()) })...)
	out = append(out, best("fastest restore", file, func(a, b Row) bool { return a.RestoreSeconds < b.RestoreSeconds }, secs(func(r Row) float64 { return r.RestoreSeconds }))...)
	out = append(out, best("fastest backup + restore", file, func(a, b Row) bool { return a.Total() < b.Total() }, secs(Row.Total))...)
	out = append(out, best("fastest pg_dump backup + restore", pgdump, func(a, b Row) bool { return a.Total() < b.Total() }, secs(Row.Total))...)
	out = append(out, best("fastest copy to another database", func(Row) bool { return true },
		func(a, b Row) bool { return a.Total() < b.Total() }, secs(Row.Total))...)
	return out
}

// clean makes a status fit on one table line.
func clean(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
