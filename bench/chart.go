package main

import (
	"context"
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"sort"
	"strings"
)

func cmdChart(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	out := fs.String("out", "bench-throughput.svg", "SVG file to write")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run . chart [--out file.svg] results.json [more.json ...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("no JSON result files given")
	}
	var reps []*Report
	for _, path := range fs.Args() {
		rep, err := ReadReport(path)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if err := writeChartFile(*out, reps); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "wrote", *out)
	return nil
}

// writeChartFile draws the chart of reps to path.
func writeChartFile(path string, reps []*Report) error {
	var results []*Result
	for _, r := range reps {
		results = append(results, r.Results...)
	}
	svg := renderChart(results)
	if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
		return fmt.Errorf("error writing %s: %w", path, err)
	}
	return nil
}

// chartPoint is one measured throughput.
type chartPoint struct {
	batch int
	rate  float64
}

// chartColors are the series colours, in target order.
var chartColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// renderChart draws throughput (msg/s, log scale) against messages per
// request (log scale) as one panel per scenario (push, consume) and one
// line per target. When a target has several runs at one batch size (e.g.
// different connection counts), the fastest is drawn.
func renderChart(results []*Result) string {
	scenarios := []string{"push", "consume"}
	series := map[string]map[string]map[int]float64{} // scenario -> target -> batch -> msg/s
	var targets []string
	seenTarget := map[string]bool{}
	batchSet := map[int]bool{}
	maxRate, minRate := 0.0, math.Inf(1)
	for _, r := range results {
		if r.Scenario != "push" && r.Scenario != "consume" || r.Params.Batch < 1 || r.MsgPerSec <= 0 {
			continue
		}
		if series[r.Scenario] == nil {
			series[r.Scenario] = map[string]map[int]float64{}
		}
		if series[r.Scenario][r.Target] == nil {
			series[r.Scenario][r.Target] = map[int]float64{}
		}
		if r.MsgPerSec > series[r.Scenario][r.Target][r.Params.Batch] {
			series[r.Scenario][r.Target][r.Params.Batch] = r.MsgPerSec
		}
		if !seenTarget[r.Target] {
			seenTarget[r.Target] = true
			targets = append(targets, r.Target)
		}
		batchSet[r.Params.Batch] = true
		maxRate = math.Max(maxRate, r.MsgPerSec)
		minRate = math.Min(minRate, r.MsgPerSec)
	}
	var batches []int
	for b := range batchSet {
		batches = append(batches, b)
	}
	sort.Ints(batches)

	const (
		panelW, panelH = 460.0, 340.0
		left, right    = 70.0, 20.0
		top, bottom    = 50.0, 50.0
		legendH        = 30.0
	)
	width := 2*panelW + 20
	height := panelH + legendH + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	if len(batches) == 0 {
		fmt.Fprintf(&b, `<text x="20" y="40">no push or consume results</text></svg>`+"\n")
		return b.String()
	}
	// Decades spanning the data.
	yLo := math.Pow(10, math.Floor(math.Log10(minRate)))
	yHi := math.Pow(10, math.Ceil(math.Log10(maxRate)))
	if yHi <= yLo {
		yHi = yLo * 10
	}
	decades := math.Round(math.Log10(yHi / yLo))
	// Pad the x axis by half a step on each side so no point sits on the frame.
	xLo, xHi := float64(batches[0])/1.6, float64(batches[len(batches)-1])*1.6
	for pi, sc := range scenarios {
		ox := float64(pi) * (panelW + 20)
		plotW, plotH := panelW-left-right, panelH-top-bottom
		px := func(batch float64) float64 {
			return ox + left + (math.Log10(batch)-math.Log10(xLo))/(math.Log10(xHi)-math.Log10(xLo))*plotW
		}
		py := func(rate float64) float64 {
			return top + plotH - (math.Log10(rate)-math.Log10(yLo))/(math.Log10(yHi)-math.Log10(yLo))*plotH
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="25" font-size="15" font-weight="bold">%s throughput</text>`+"\n", ox+left, sc)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", ox+left, top, plotW, plotH)
		for y := yLo; y <= yHi*1.0001; y *= 10 {
			for _, m := range []float64{1, 2, 5} {
				v := y * m
				if v > yHi*1.0001 {
					break
				}
				stroke := "#ddd"
				if m == 1 {
					stroke = "#bbb"
				}
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", ox+left, ox+left+plotW, py(v), py(v), stroke)
				// Beyond two decades the 2 and 5 lines stay unlabelled, or
				// their labels would overlap.
				if m == 1 || decades <= 2 {
					fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", ox+left-5, py(v), siNum(v))
				}
			}
		}
		for _, bt := range batches {
			x := px(float64(bt))
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, x, top, top+plotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, top+plotH+16, bt)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">messages per request</text>`+"\n", ox+left+plotW/2, top+plotH+36)
		fmt.Fprintf(&b, `<text transform="translate(%.1f,%.1f) rotate(-90)" text-anchor="middle">msg/s (log scale)</text>`+"\n", ox+16, top+plotH/2)
		for ti, t := range targets {
			pts := series[sc][t]
			if len(pts) == 0 {
				continue
			}
			color := chartColors[ti%len(chartColors)]
			var line []chartPoint
			for _, bt := range batches {
				if v, ok := pts[bt]; ok {
					line = append(line, chartPoint{bt, v})
				}
			}
			var path strings.Builder
			for i, p := range line {
				cmd := "L"
				if i == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, px(float64(p.batch)), py(p.rate))
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(path.String()), color)
			for _, p := range line {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", px(float64(p.batch)), py(p.rate), color)
				dy := -6.0 // alternate above and below the point, so close series stay legible
				if ti%2 == 1 {
					dy = 14
				}
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s" font-size="10">%s</text>`+"\n",
					px(float64(p.batch))+6, py(p.rate)+dy, color, siNum(p.rate))
			}
		}
	}
	for ti, t := range targets {
		x := left + float64(ti)*150
		y := panelH + 10
		color := chartColors[ti%len(chartColors)]
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s"/>`+"\n", x, y, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+20, y+11, html.EscapeString(t))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// siNum formats 1500 as "1.5k" and 2000000 as "2M".
func siNum(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), ".0") + "M"
	case v >= 1e3:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), ".0") + "k"
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
