package report

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/casestudy/casestudy/stats"
)

// HistoryFormats are the output formats of casestudy history.
var HistoryFormats = []string{"text", "md", "html"}

// WriteHistory renders h as text, md or html (with charts).
func WriteHistory(w io.Writer, h *History, format string) error {
	switch format {
	case "text":
		return historyText(w, h)
	case "md":
		return historyMarkdown(w, h)
	case "html":
		return historyHTML(w, h)
	}
	return fmt.Errorf("unknown history format %q: use html, md or text", format)
}

func (p HistoryPoint) cell() string {
	if p.Value.N == 0 {
		if p.Outcome == "" {
			return "—"
		}
		return string(p.Outcome)
	}
	return Num(p.Value.Center)
}

func driftText(d *stats.Comparison) string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s)", d.Text(), d.PText())
}

// historyMethod says what the numbers are.
func historyMethod(h *History) string {
	drift := fmt.Sprintf("%s: geometric mean over each run's launches. Last vs first: the last run where the trial finished "+
		"against the first, ratio with a %s Student t interval over launches (pooled variance, as compare) and its verdict against ±%s. ",
		h.Metric.Unit, stats.PercentText(h.Level.Confidence), stats.PercentText(h.Level.Threshold))
	if h.ChangeLevel == 0 {
		return drift + fmt.Sprintf("Change point: not tested, no trial finished in %d runs or more", changeMinRuns)
	}
	opt := h.changeOptions().WithDefaults()
	return drift + fmt.Sprintf("Change point: E-Divisive means on each trial's values over the runs (%d or more finished), "+
		"permutation test at %s per trial (%s over the %s tested; every order of up to %d runs, else %d random orders); "+
		"%s; the run named is the first after the change, the ratio after over before (better > 1)",
		changeMinRuns, stats.PercentText(h.ChangeLevel), stats.PercentText(ChangeAlpha), countText(h.ChangeTested, "trial"),
		stats.ExactOrders, opt.Permutations, h.changeReachText())
}

// historyHeader: the answer first (last vs first, change point), then one
// column per run, so that the answer is never the column a narrow screen
// cuts.
func historyHeader(h *History) []string {
	return append([]string{"trial", "knobs", "last vs first", "change point"}, runLabels(h.Runs)...)
}

// historyFixed is how many leading columns are not runs.
const historyFixed = 4

func historyRows(h *History) [][]string {
	var rows [][]string
	for _, t := range h.Trials {
		row := []string{t.ID, t.Knobs, driftText(t.Drift), h.changeText(t)}
		for _, p := range t.Points {
			row = append(row, p.cell())
		}
		rows = append(rows, row)
	}
	return rows
}

func historyText(w io.Writer, h *History) error {
	fmt.Fprintf(w, "%s: %s of each trial over %d runs in %s\n\n", h.Study, h.Metric.Unit, len(h.Runs), h.Dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(historyHeader(h), "\t"))
	for _, row := range historyRows(h) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", historyMethod(h))
	for _, warn := range h.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

func historyMarkdown(w io.Writer, h *History) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: history\n\n%d runs from %s to %s. %s.\n\n",
		mdEscape(h.Study), len(h.Runs), h.Runs[0].Created.Format("2006-01-02"), h.Runs[len(h.Runs)-1].Created.Format("2006-01-02"), mdEscape(historyMethod(h)))
	head := historyHeader(h)
	mdRow(&b, head)
	mdRow(&b, slicesRepeat("---", len(head)))
	for _, row := range historyRows(h) {
		mdRow(&b, row)
	}
	for _, warn := range h.Warnings {
		fmt.Fprintf(&b, "\n- warning: %s", mdEscape(warn))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// lineColours are the history lines' colours; after eight, lines are dashed.
var lineColours = []color.Color{colBlue, colOrange, colGreen, colRed, colPurple, colSky, colGrey, color.RGBA{0, 0, 0, 255}}

// historyChart draws one line per trial over the runs' times, labelled by the
// knobs the trial changes; relative divides each trial by its first
// measurement (percent).
func historyChart(h *History, relative bool) (template.HTML, error) {
	title, ylabel := h.Metric.Unit+" over runs", h.Metric.Unit
	if relative {
		title, ylabel = h.Metric.Unit+" relative to each trial's first run", "% of first run"
	}
	p := newPlot(title, "run (UTC)", ylabel)
	var runTicks []plot.Tick // one labelled tick per run
	for _, r := range h.Runs {
		runTicks = append(runTicks, plot.Tick{Value: float64(r.Created.Unix()), Label: r.Created.Format("01-02\n15:04")})
	}
	p.X.Tick.Marker = plot.ConstantTicks(runTicks)
	p.Y.Tick.Marker = niceTicks{}
	f := &figure{p: p, w: chartWidth, h: 3.6 * vg.Inch, label: title, legendBelow: true}
	if len(h.Runs) > 8 { // labels of many runs would overlap: every other one
		for i := range runTicks {
			if i%2 == 1 && i != len(runTicks)-1 {
				runTicks[i].Label = ""
			}
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, t := range h.Trials {
		var pts [][2]float64
		var first float64
		for ri, pt := range t.Points {
			if pt.Value.N == 0 {
				continue
			}
			y := pt.Value.Center
			if relative {
				if first == 0 {
					first = y
				}
				y = 100 * y / first
			}
			pts = append(pts, [2]float64{float64(h.Runs[ri].Created.Unix()), y})
			lo, hi = min(lo, y), max(hi, y)
		}
		if len(pts) == 0 {
			continue
		}
		c, dash := lineColours[i%len(lineColours)], i >= len(lineColours)
		attrs := [][2]string{{"data-trial", t.ID}, {"data-label", t.Knobs}}
		for j, pt := range pts {
			tip := fmt.Sprintf("%s (%s): %s", t.Knobs, t.ID, Num(pt[1]))
			if j > 0 {
				f.marks = append(f.marks, mark{shape: shapeSegment, class: "mark segment", x: pts[j-1][0], y: pts[j-1][1],
					x2: pt[0], y2: pt[1], stroke: c, width: vg.Points(1.5), dash: dash, attrs: attrs, title: t.Knobs})
			}
			f.marks = append(f.marks, mark{shape: shapeCircle, class: "mark point", x: pt[0], y: pt[1], r: vg.Points(3),
				fill: c, attrs: attrs, title: tip})
		}
		f.legend = append(f.legend, legendItem{text: t.Knobs, shape: shapeSegment, stroke: c, dash: dash})
		for _, cp := range t.Changes {
			for _, pt := range pts {
				if pt[0] == float64(h.Runs[cp.Index].Created.Unix()) {
					f.marks = append(f.marks, mark{shape: shapeRing, class: "mark change", x: pt[0], y: pt[1], r: vg.Points(7),
						stroke: colRed, width: vg.Points(1.6), attrs: attrs,
						title: fmt.Sprintf("%s (%s): change point, %s after it (p=%.3f)", t.Knobs, t.ID, stats.RatioText(cp.Ratio), cp.P)})
				}
			}
		}
	}
	if len(f.legend) == 0 {
		return "", nil
	}
	x0, x1 := float64(h.Runs[0].Created.Unix()), float64(h.Runs[len(h.Runs)-1].Created.Unix())
	pad := max(0.05*(x1-x0), 1800)
	p.X.Min, p.X.Max = x0-pad, x1+pad
	if relative {
		span := max(hi-lo, 2)
		p.Y.Min, p.Y.Max = lo-0.1*span, hi+0.1*span
	} else {
		p.Y.Min, p.Y.Max = 0, niceMax(hi)
	}
	return f.svg()
}

var historyTemplate = template.Must(template.New("history").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.H.Study}} · casestudy history</title>
<style>{{.CSS}}</style></head>
<body><main>
<h1>{{.H.Study}}: history</h1>
<p class="sub">{{len .H.Runs}} runs in <code>{{.H.Dir}}</code></p>
{{if .Charts}}<h2>Charts</h2><div class="figs">{{range .Charts}}<figure><div class="card">{{.}}</div></figure>{{end}}</div>{{end}}
<h2>Trials</h2>
<div class="tablewrap"><table>
<thead><tr>{{range $i, $c := .Head}}{{if lt $i 4}}<th>{{$c}}</th>{{else}}<th class="num">{{with index $.Links $i}}<a href="{{.}}">{{$c}}</a>{{else}}{{$c}}{{end}}</th>{{end}}{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td><code>{{$c}}</code></td>{{else if lt $i 4}}<td class="wrap">{{$c}}</td>{{else}}<td class="num">{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</tbody></table></div>
<p class="muted">{{.Method}}.</p>
{{range .H.Warnings}}<p class="sev-warning">warning: {{.}}</p>{{end}}
<h2>Runs</h2>
<ul>{{range .H.Runs}}<li><code>{{.RunID}}</code> {{.Created.Format "2006-01-02 15:04:05 UTC"}} · {{if .Report}}<a href="{{.Report}}">report</a> · {{end}}{{.Dir}}</li>{{end}}</ul>
</main></body></html>
`))

func historyHTML(w io.Writer, h *History) error {
	css, err := assets.ReadFile("assets/report.css")
	if err != nil {
		return err
	}
	var charts []template.HTML
	for _, rel := range []bool{false, true} {
		c, err := historyChart(h, rel)
		if err != nil {
			return err
		}
		if c != "" {
			charts = append(charts, c)
		}
	}
	links := make([]string, historyFixed, historyFixed+len(h.Runs))
	for _, r := range h.Runs {
		links = append(links, r.Report)
	}
	return historyTemplate.Execute(w, struct {
		H      *History
		Charts []template.HTML
		Head   []string
		Rows   [][]string
		Links  []string
		Method string
		CSS    template.CSS
	}{h, charts, historyHeader(h), historyRows(h), links, historyMethod(h), template.CSS(css)}) // #nosec: our own stylesheet
}
