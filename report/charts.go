package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is one inline SVG figure of the HTML report.
type Chart struct {
	ID      string
	Title   string
	Caption string
	SVG     template.HTML // <svg ...>...</svg>, text escaped by vgsvg
}

// Palette (colour-blind safe, Okabe-Ito).
var (
	colBlue   = color.RGBA{0, 114, 178, 255}
	colOrange = color.RGBA{230, 159, 0, 255}
	colGreen  = color.RGBA{0, 158, 115, 255}
	colRed    = color.RGBA{213, 94, 0, 255}
	colPurple = color.RGBA{204, 121, 167, 255}
	colSky    = color.RGBA{86, 180, 233, 255}
	colGrey   = color.RGBA{140, 140, 140, 255}
)

const chartWidth = 7.2 * vg.Inch

// Charts makes every chart of the report; a summary without an ok trial has none.
func Charts(s *Summary) ([]Chart, error) {
	ok := okTrials(s)
	if len(ok) == 0 {
		return nil, nil
	}
	var charts []Chart
	for _, k := range s.SweptKnobs {
		c, err := knobChart(s, k)
		if err != nil {
			return nil, err
		}
		if c != nil {
			charts = append(charts, *c)
		}
	}
	for _, f := range []func([]*Trial) (*Chart, error){breakdownChart, memoryChart, efficiencyChart} {
		c, err := f(ok)
		if err != nil {
			return nil, err
		}
		if c != nil {
			charts = append(charts, *c)
		}
	}
	return charts, nil
}

// knobChart: throughput of every ok trial against the knob's values, with
// interval whiskers, the baseline as a dashed line and the best highlighted.
func knobChart(s *Summary, knob string) (*Chart, error) {
	ok := okTrials(s)
	values := knobValues(ok, knob)
	if len(values) < 2 {
		return nil, nil
	}
	pos := map[string]int{}
	for i, v := range values {
		pos[v] = i
	}
	groups := map[string][]*Trial{}
	for _, t := range ok {
		groups[t.Knobs[knob]] = append(groups[t.Knobs[knob]], t)
	}
	unit := s.Metric.Unit
	p := newPlot(unit+" vs "+knob, knob, unit)
	p.NominalX(values...)
	var pts, bestPts plotter.XYs
	var errs plotter.YErrors
	var base float64
	for _, v := range values {
		g := groups[v]
		sort.Slice(g, func(i, j int) bool { return g[i].Index < g[j].Index })
		for j, t := range g {
			x := float64(pos[v])
			if len(g) > 1 { // spread trials sharing a value
				x += 0.5 * (float64(j)/float64(len(g)-1) - 0.5)
			}
			lo, hi := whisker(t)
			pts = append(pts, plotter.XY{X: x, Y: t.Value.Center})
			errs = append(errs, struct{ Low, High float64 }{t.Value.Center - lo, hi - t.Value.Center})
			if t.Best {
				bestPts = append(bestPts, plotter.XY{X: x, Y: t.Value.Center})
			}
			if t.Baseline {
				base = t.Value.Center
			}
		}
	}
	eb, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{pts, errs})
	if err != nil {
		return nil, err
	}
	eb.LineStyle.Color, eb.LineStyle.Width, eb.CapWidth = colBlue, vg.Points(1.2), vg.Points(6)
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: colBlue, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	p.Add(eb, sc)
	p.Legend.Add("trial (whisker: "+PercentConf(s.Confidence)+" interval)", sc)
	if len(bestPts) > 0 {
		bs, err := plotter.NewScatter(bestPts)
		if err != nil {
			return nil, err
		}
		bs.GlyphStyle = draw.GlyphStyle{Color: colOrange, Radius: vg.Points(7), Shape: draw.RingGlyph{}}
		p.Add(bs)
		p.Legend.Add("best", bs)
	}
	if base > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: base}, {X: float64(len(values)) - 0.5, Y: base}})
		if err != nil {
			return nil, err
		}
		l.LineStyle = draw.LineStyle{Color: colGrey, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		p.Add(l)
		p.Legend.Add("baseline", l)
	}
	p.X.Min, p.X.Max = -0.5, float64(len(values))-0.5
	p.Y.Min = 0
	p.Y.Tick.Marker = niceTicks{}
	p.Legend.Top, p.Legend.Left = false, true
	p.Legend.YOffs = vg.Points(-2)
	svg, err := renderSVG(p, chartWidth, 3.4*vg.Inch, unit+" against "+knob)
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "knob-" + knob, Title: unit + " vs " + knob, SVG: svg,
		Caption: "Each point is a trial's " + unit + ", the geometric mean over its launches (points sharing a value differ in other knobs). " +
			"Whiskers: the interval over launches; none for a trial with one launch. Dashed: the baseline trial; ringed: the best."}, nil
}

// whisker is the CI when bounded, else nothing (a zero-length whisker): the
// sample range would let one outlier step dominate the chart.
func whisker(t *Trial) (lo, hi float64) {
	if t.Throughput.Bounded() {
		return t.Throughput.Lo, t.Throughput.Hi
	}
	return t.Value.Center, t.Value.Center
}

// knobValues are the knob's distinct values, numerically sorted when all are
// numbers, else in order of first appearance.
func knobValues(trials []*Trial, knob string) []string {
	var vals []string
	seen := map[string]bool{}
	numeric := true
	for _, t := range trials {
		v, ok := t.Knobs[knob]
		if !ok || seen[v] {
			continue
		}
		seen[v] = true
		vals = append(vals, v)
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			numeric = false
		}
	}
	if numeric {
		sort.Slice(vals, func(i, j int) bool {
			a, _ := strconv.ParseFloat(vals[i], 64)
			b, _ := strconv.ParseFloat(vals[j], 64)
			return a < b
		})
	}
	return vals
}

// breakdownChart: the median step split into its parts, one stacked bar per trial.
func breakdownChart(ok []*Trial) (*Chart, error) {
	parts := []struct {
		name string
		col  color.Color
		get  func(*Breakdown) float64
	}{
		{"forward", colBlue, func(b *Breakdown) float64 { return b.ForwardMS }},
		{"backward", colSky, func(b *Breakdown) float64 { return b.BackwardMS }},
		{"optimizer", colGreen, func(b *Breakdown) float64 { return b.OptimizerMS }},
		{"exposed comm", colRed, func(b *Breakdown) float64 { return b.ExposedCommMS }},
		{"pipeline bubble", colPurple, func(b *Breakdown) float64 { return b.BubbleMS }},
		{"other", colGrey, func(b *Breakdown) float64 { return b.OtherMS }},
	}
	var trials []*Trial
	for _, t := range ok {
		if t.Breakdown != nil && t.StepMS.Median > 0 {
			trials = append(trials, t)
		}
	}
	if len(trials) == 0 {
		return nil, nil
	}
	p := newPlot("Step time breakdown", "ms per step (median of each part)", "")
	p.NominalY(barLabels(trials)...)
	var below *plotter.BarChart
	var maxStack float64
	for _, t := range trials {
		b := t.Breakdown
		maxStack = max(maxStack, b.ForwardMS+b.BackwardMS+b.OptimizerMS+b.ExposedCommMS+b.BubbleMS+b.OtherMS)
	}
	for _, part := range parts {
		vals := make(plotter.Values, len(trials))
		any := false
		for i, t := range trials {
			vals[i] = part.get(t.Breakdown)
			any = any || vals[i] > 0
		}
		if !any {
			continue
		}
		bc, err := plotter.NewBarChart(vals, barWidth(len(trials)))
		if err != nil {
			return nil, err
		}
		bc.Horizontal, bc.Color, bc.LineStyle.Width = true, part.col, 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part.name, bc)
	}
	p.X.Min = 0
	p.X.Max = 1.3 * maxStack // room for the legend on the right
	p.X.Tick.Marker = niceTicks{}
	p.Legend.Top = true
	p.Legend.Left = false
	svg, err := renderSVG(p, chartWidth, barHeight(len(trials))+0.5*vg.Inch, "Step time breakdown per trial")
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "breakdown", Title: "Step time breakdown", SVG: svg,
		Caption: "Medians over measured steps (rank 0). Exposed comm is communication not hidden behind compute; " +
			"other is the step minus the named parts (data loading, launch gaps, synchronisation)."}, nil
}

func memoryChart(ok []*Trial) (*Chart, error) {
	vals := make(plotter.Values, len(ok))
	any := false
	for i, t := range ok {
		vals[i] = float64(t.MemPeakBytes) / (1 << 30)
		any = any || vals[i] > 0
	}
	if !any {
		return nil, nil
	}
	svg, err := hbar("Peak memory per trial", "GiB (peak allocated, max over ranks)", ok, vals, colSky)
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "memory", Title: "Peak memory", SVG: svg,
		Caption: "Peak device memory allocated by the caching allocator, the maximum over ranks and steps."}, nil
}

// efficiencyChart: MFU per trial, or achieved TFLOP/s when no peak is known.
func efficiencyChart(ok []*Trial) (*Chart, error) {
	mfu := make(plotter.Values, len(ok))
	tf := make(plotter.Values, len(ok))
	anyMFU, anyTF := false, false
	for i, t := range ok {
		mfu[i], tf[i] = 100*t.MFU, t.TFLOPS
		anyMFU, anyTF = anyMFU || t.MFU > 0, anyTF || t.TFLOPS > 0
	}
	switch {
	case anyMFU:
		svg, err := hbar("Model FLOPs utilisation per trial", "MFU (% of the device's peak TFLOP/s)", ok, mfu, colGreen)
		if err != nil {
			return nil, err
		}
		return &Chart{ID: "mfu", Title: "MFU", SVG: svg,
			Caption: "Achieved model TFLOP/s (from the model's FLOPs per sample, not counting recomputation) over the peak of the device at the trial's precision."}, nil
	case anyTF:
		svg, err := hbar("Achieved TFLOP/s per trial", "TFLOP/s per rank (model FLOPs)", ok, tf, colGreen)
		if err != nil {
			return nil, err
		}
		return &Chart{ID: "mfu", Title: "TFLOP/s", SVG: svg,
			Caption: "MFU is not shown: the device's peak TFLOP/s is not known (e.g. CPU runs)."}, nil
	}
	return nil, nil
}

func hbar(title, xlabel string, trials []*Trial, vals plotter.Values, col color.Color) (template.HTML, error) {
	p := newPlot(title, xlabel, "")
	p.NominalY(barLabels(trials)...)
	bc, err := plotter.NewBarChart(vals, barWidth(len(trials)))
	if err != nil {
		return "", err
	}
	bc.Horizontal, bc.Color, bc.LineStyle.Width = true, col, 0
	p.Add(bc)
	p.X.Min = 0
	p.X.Max = 1.06 * slices.Max(vals) // a little room after the longest bar
	p.X.Tick.Marker = niceTicks{}
	return renderSVG(p, chartWidth, barHeight(len(trials)), title)
}

func barLabels(trials []*Trial) []string {
	out := make([]string, len(trials))
	for i, t := range trials {
		out[i] = t.ID
		if t.Baseline {
			out[i] += " (base)"
		}
		if t.Best {
			out[i] += " ★"
		}
	}
	return out
}

func barWidth(n int) vg.Length { return vg.Points(14) }

func barHeight(n int) vg.Length { return vg.Length(n)*vg.Points(21) + 0.9*vg.Inch }

// newPlot is a plot with the report's fonts and a light grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	for _, st := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		st.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Title.Padding = vg.Points(6)
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = vg.Points(10), vg.Points(10)
	p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = vg.Points(9), vg.Points(9)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = color.RGBA{225, 225, 225, 255}, color.RGBA{225, 225, 225, 255}
	p.Add(g)
	return p
}

// renderSVG draws p and returns the bare <svg> element with an accessible name.
func renderSVG(p *plot.Plot, w, h vg.Length, label string) (template.HTML, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", err
	}
	out := buf.String()
	i := strings.Index(out, "<svg")
	if i < 0 {
		return "", fmt.Errorf("vgsvg produced no <svg> element")
	}
	out = `<svg class="chart" role="img" aria-label="` + html.EscapeString(label) + `" ` + out[i+len("<svg "):]
	return template.HTML(out), nil // #nosec: vgsvg escapes every text it writes
}

// niceTicks labels a value axis at 1-2-5 steps (about six labels) with the
// report's number format.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: Num(lo)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, int(-math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		for m := 1; m < 5; m++ { // unlabelled minor ticks
			if mv := v + float64(m)*step/5; mv < hi {
				ticks = append(ticks, plot.Tick{Value: mv})
			}
		}
	}
	return ticks
}
