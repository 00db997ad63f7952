package results

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Charts returns one dataset's four charts (dump time, restore time, total
// time, size as % of the database) from its verified rows. A clone has no
// file: it appears only in the total-time chart.
func Charts(rows []Row) []Chart {
	dump := Chart{Title: "Backup (dump) time", Unit: "seconds"}
	restore := Chart{Title: "Restore time", Unit: "seconds"}
	total := Chart{Title: "Total time: backup + restore (a clone: the whole copy)", Unit: "seconds"}
	size := Chart{Title: "Backup size as % of the database", Unit: "% of pg_database_size"}
	for _, r := range rows {
		if !r.OK() {
			continue
		}
		c := toolColor(r)
		total.Bars = append(total.Bars, Bar{Label: r.Label(), Value: r.Total(), Color: c})
		if r.IsClone() {
			continue
		}
		dump.Bars = append(dump.Bars, Bar{Label: r.Label(), Value: r.BackupSeconds, Color: c})
		restore.Bars = append(restore.Bars, Bar{Label: r.Label(), Value: r.RestoreSeconds, Color: c})
		size.Bars = append(size.Bars, Bar{Label: r.Label(), Value: 100 * r.SizeRatio(), Color: c,
			Text: fmt.Sprintf("%.1f%% (%s MiB)", 100*r.SizeRatio(), mib(r.BackupBytes))})
	}
	return []Chart{dump, restore, total, size}
}

const pageStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#202124;max-width:1140px}
h1{font-size:24px}h2{font-size:20px;margin-top:40px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:12px 0}td,th{border:1px solid #ddd;padding:2px 6px}
td.n{text-align:right}tr.bad td{color:#b31412}svg.chart{display:block;margin:16px 0}
.legend span{margin-right:14px;font-size:13px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
ul.meta{font-size:14px}`

// WriteHTML writes one self-contained page (inline CSS and SVG, no
// scripts, nothing fetched) with the run's description and, per dataset,
// the picks, the four charts and the table.
func WriteHTML(w io.Writer, m Meta, rows []Row) error {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>\n", e(m.Title), pageStyle)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<ul class=\"meta\">", e(m.Title))
	for _, l := range metaLines(m) {
		fmt.Fprintf(&b, "<li>%s</li>", e(strings.ReplaceAll(l, "`", "")))
	}
	b.WriteString("</ul>\n")
	for _, d := range m.datasets(rows) {
		rs := of(rows, d)
		fmt.Fprintf(&b, "<section class=\"dataset\" id=\"%s\"><h2>%s</h2>\n", e(d), e(d))
		if desc := m.Datasets[d]; desc != "" {
			fmt.Fprintf(&b, "<p>%s", e(desc))
			if len(rs) > 0 && rs[0].DatabaseBytes > 0 {
				fmt.Fprintf(&b, "; database %s MiB", mib(rs[0].DatabaseBytes))
			}
			b.WriteString(".</p>\n")
		}
		if picks := Picks(rs); len(picks) > 0 {
			b.WriteString("<ul>")
			for _, p := range picks {
				fmt.Fprintf(&b, "<li>%s: <b>%s</b> (%s)</li>", e(p.Need), e(p.Row.Label()), e(p.Why))
			}
			b.WriteString("</ul>\n")
		}
		b.WriteString(legend(rs))
		for _, c := range Charts(rs) {
			if len(c.Bars) > 0 {
				b.WriteString(c.SVG())
				b.WriteString("\n")
			}
		}
		b.WriteString(htmlTable(rs))
		b.WriteString("</section>\n")
	}
	b.WriteString("</body></html>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

// htmlTable is the Markdown table's columns as an HTML table.
func htmlTable(rows []Row) string {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<table><tr><th>tool</th><th>format</th><th>compression</th><th>level</th><th>backup s</th><th>restore s</th><th>total s</th><th>backup MiB</th><th>database MiB</th><th>restored MiB</th><th>size %</th><th>client CPU s</th><th>peak RSS MiB</th><th>status</th></tr>\n")
	for _, r := range rows {
		level := ""
		if r.Level != 0 {
			level = fmt.Sprint(r.Level)
		}
		if !r.OK() {
			fmt.Fprintf(&b, "<tr class=\"bad\"><td>%s</td><td>%s</td><td>%s</td><td class=\"n\">%s</td><td colspan=\"9\"></td><td>%s</td></tr>\n",
				e(r.Tool), e(r.Format), e(r.Compression), level, e(clean(r.Status)))
			continue
		}
		backup, size, pct := fmt.Sprintf("%.2f", r.BackupSeconds), mib(r.BackupBytes), fmt.Sprintf("%.1f", 100*r.SizeRatio())
		if r.IsClone() {
			backup, size, pct = "", "", ""
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%.2f</td><td class=\"n\">%.2f</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%.2f</td><td class=\"n\">%.0f</td><td>%s</td></tr>\n",
			e(r.Tool), e(r.Format), e(r.Compression), level, backup, r.RestoreSeconds, r.Total(), size,
			mib(r.DatabaseBytes), mib(r.RestoredBytes), pct, r.ClientCPU(), float64(r.PeakRSS)/(1<<20), e(r.Status))
	}
	b.WriteString("</table>\n")
	return b.String()
}
