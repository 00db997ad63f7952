package benchkit

import (
	"fmt"
	"io"
	"strings"
)

// Markdown prints results as a table with each row's wall-time ratio to the
// row named baseline (how many times faster than the baseline it is).
func Markdown(w io.Writer, title string, results []Result, baseline string) {
	var base *Result
	for i := range results {
		if results[i].Name == baseline {
			base = &results[i]
		}
	}
	fmt.Fprintf(w, "\n### %s\n\n", title)
	fmt.Fprintln(w, "| what | wall s | client CPU s | peak RSS MiB | own peak RSS MiB | size MiB | speed vs "+baseline+" |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | |\n", r.Name, strings.ReplaceAll(r.Err.Error(), "|", "/"))
			continue
		}
		ratio := ""
		if base != nil && base.Err == nil && r.Wall > 0 {
			ratio = fmt.Sprintf("%.2fx", base.Wall.Seconds()/r.Wall.Seconds())
		}
		size := ""
		if r.Size > 0 {
			size = fmt.Sprintf("%.1f", float64(r.Size)/(1<<20))
		}
		own := ""
		if r.OwnRSS > 0 {
			own = fmt.Sprintf("%.0f", float64(r.OwnRSS)/(1<<20))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.0f | %s | %s | %s |\n", r.Name, r.Wall.Seconds(), r.CPU.Seconds(),
			float64(r.MaxRSS)/(1<<20), own, size, ratio)
	}
}
