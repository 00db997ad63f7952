package benchkit

import (
	"fmt"
	"io"
	"runtime"
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
	fmt.Fprintln(w, "| what | wall s | client CPU s | machine CPU s (busy) | peak RSS MiB | own peak RSS MiB | size MiB | speed vs "+baseline+" |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(w, "| %s | failed: %s | | | | | | |\n", r.Name, strings.ReplaceAll(r.Err.Error(), "|", "/"))
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
		machine := ""
		if r.Machine > 0 && r.Wall > 0 {
			machine = fmt.Sprintf("%.2f (%.0f%%)", r.Machine.Seconds(), 100*r.Machine.Seconds()/(r.Wall.Seconds()*float64(runtime.NumCPU())))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s | %.0f | %s | %s | %s |\n", r.Name, r.Wall.Seconds(), r.CPU.Seconds(), machine,
			float64(r.MaxRSS)/(1<<20), own, size, ratio)
	}
}
