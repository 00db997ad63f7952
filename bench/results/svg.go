package results

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Bar is one bar of a chart.
type Bar struct {
	Label string
	Value float64
	Color string
	Text  string // printed after the bar; the value when empty
}

// Chart is a horizontal bar chart: one bar per row, labels on the left,
// values printed after the bars, a scale of round ticks along the top.
type Chart struct {
	Title string
	Unit  string // axis caption, e.g. "seconds"
	Bars  []Bar
}

// chart geometry, in SVG user units (pixels at 100% zoom).
const (
	chartWidth  = 1100
	labelWidth  = 230
	valueWidth  = 90
	barHeight   = 16
	barGap      = 4
	chartTop    = 46
	chartBottom = 12
)

// SVG renders the chart as a standalone <svg> element.
func (c Chart) SVG() string {
	plot := float64(chartWidth - labelWidth - valueWidth)
	height := chartTop + len(c.Bars)*(barHeight+barGap) + chartBottom
	maxV := 0.0
	for _, b := range c.Bars {
		maxV = math.Max(maxV, b.Value)
	}
	step := niceStep(maxV)
	top := step * math.Ceil(maxV/step)
	if top == 0 {
		top = 1
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartWidth, height, chartWidth, height, html.EscapeString(c.Title))
	fmt.Fprintf(&s, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, chartWidth, height)
	fmt.Fprintf(&s, `<text x="0" y="16" font-size="15" font-weight="bold">%s</text>`, html.EscapeString(c.Title))
	if c.Unit != "" {
		fmt.Fprintf(&s, `<text x="%d" y="16" font-size="12" fill="#555" text-anchor="end">%s</text>`, chartWidth-valueWidth, html.EscapeString(c.Unit))
	}
	bottom := height - chartBottom
	for v := 0.0; v <= top+step/2; v += step {
		x := labelWidth + plot*v/top
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`, x, chartTop-6, x, bottom)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" font-size="11" fill="#555" text-anchor="middle">%s</text>`, x, chartTop-10, fmtNum(v))
	}
	for i, b := range c.Bars {
		y := chartTop + i*(barHeight+barGap)
		w := plot * b.Value / top
		text := b.Text
		if text == "" {
			text = fmtNum(b.Value)
		}
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="12" text-anchor="end">%s</text>`, labelWidth-6, y+barHeight-4, html.EscapeString(b.Label))
		fmt.Fprintf(&s, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`,
			labelWidth, y, w, barHeight, html.EscapeString(b.Color), html.EscapeString(b.Label), html.EscapeString(text))
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" font-size="11" fill="#333">%s</text>`, float64(labelWidth)+w+4, y+barHeight-4, html.EscapeString(text))
	}
	s.WriteString(`</svg>`)
	return s.String()
}

// niceStep returns a tick step of 1, 2 or 5 times a power of ten that
// divides 0..max into at most about eight intervals.
func niceStep(max float64) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / 8
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// fmtNum prints a number with as few digits as it needs.
func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// toolColor gives every format and tool its own color, the same in every
// chart, so a reader finds a variant by color across the charts.
func toolColor(r Row) string {
	switch {
	case r.Tool == "pgsprint":
		return "#e8710a"
	case r.Tool == "pgsprint clone":
		return "#b31412"
	case r.IsClone():
		return "#8e24aa"
	}
	switch r.Format {
	case "plain":
		return "#7f8c8d"
	case "custom":
		return "#1a73e8"
	case "directory":
		return "#188038"
	case "tar":
		return "#a0522d"
	}
	return "#444444"
}

// legend lists the colors of the rows present, as HTML.
func legend(rows []Row) string {
	seen := map[string]bool{}
	var s strings.Builder
	s.WriteString(`<p class="legend">`)
	for _, r := range rows {
		if !r.OK() {
			continue
		}
		name := r.Tool
		if r.Tool == "pg_dump" {
			name = "pg_dump " + r.Format
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		fmt.Fprintf(&s, `<span><i style="background:%s"></i>%s</span> `, toolColor(r), html.EscapeString(name))
	}
	s.WriteString(`</p>`)
	return s.String()
}
