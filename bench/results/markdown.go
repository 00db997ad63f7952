package results

import (
	"fmt"
	"io"
	"strings"
)

// mib formats bytes as MiB with one decimal.
func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// WriteMarkdown writes the run's description, then per dataset the picks
// and one table of every row.
func WriteMarkdown(w io.Writer, m Meta, rows []Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", m.Title)
	for _, l := range metaLines(m) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	for _, d := range m.datasets(rows) {
		rs := of(rows, d)
		fmt.Fprintf(&b, "\n### %s\n\n", d)
		if desc := m.Datasets[d]; desc != "" {
			fmt.Fprintf(&b, "%s", desc)
			if len(rs) > 0 && rs[0].DatabaseBytes > 0 {
				fmt.Fprintf(&b, "; database %s MiB", mib(rs[0].DatabaseBytes))
			}
			b.WriteString(".\n\n")
		}
		for _, p := range Picks(rs) {
			fmt.Fprintf(&b, "- %s: **%s** (%s)\n", p.Need, p.Row.Label(), p.Why)
		}
		b.WriteString("\n| tool | format | compression | level | backup s | restore s | total s | backup MiB | database MiB | restored MiB | size % | client CPU s | peak RSS MiB | status |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, r := range rs {
			level := ""
			if r.Level != 0 {
				level = fmt.Sprint(r.Level)
			}
			if !r.OK() {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | | | | | | | | | | %s |\n", r.Tool, r.Format, r.Compression, level, clean(r.Status))
				continue
			}
			backup, size, pct := fmt.Sprintf("%.2f", r.BackupSeconds), mib(r.BackupBytes), fmt.Sprintf("%.1f", 100*r.SizeRatio())
			if r.IsClone() {
				backup, size, pct = "", "", ""
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f | %.2f | %s | %s | %s | %s | %.2f | %.0f | %s |\n",
				r.Tool, r.Format, r.Compression, level, backup, r.RestoreSeconds, r.Total(), size,
				mib(r.DatabaseBytes), mib(r.RestoredBytes), pct, r.ClientCPU(), float64(r.PeakRSS)/(1<<20), r.Status)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return nil
}

// metaLines describes the run, one fact a line.
func metaLines(m Meta) []string {
	var out []string
	add := func(k, v string) {
		if v != "" {
			out = append(out, k+": "+v)
		}
	}
	if !m.Started.IsZero() {
		add("started", m.Started.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if m.Duration > 0 {
		add("duration", m.Duration.Round(1e9).String())
	}
	if m.Size != "" {
		add("size", fmt.Sprintf("%s (scale %g), -j %d", m.Size, m.Scale, m.Jobs))
	}
	add("machine", m.Machine)
	add("load average during the run", m.Load)
	add("server", m.Server)
	add("pg_dump", m.PgDump)
	if m.Command != "" {
		add("rerun", "`"+m.Command+"`")
	}
	out = append(out, m.Notes...)
	return out
}
