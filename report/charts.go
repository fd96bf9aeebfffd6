package report

import (
	"html/template"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one inline SVG figure of the HTML report.
type Chart struct {
	ID      string
	Title   string
	Caption string
	SVG     template.HTML // <svg ...>...</svg>, see figure
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
	colDark   = color.RGBA{60, 60, 60, 255}
)

const chartWidth = 7.2 * vg.Inch

// Charts makes every chart of the report; a summary without an ok trial has
// none. The sweep's strategy decides how the results are drawn: per knob
// (one-at-a-time), as heatmaps (grid over two knobs or more), as the path it
// took (greedy), or trial by trial (list); the step breakdown, memory and MFU
// follow for every strategy.
func Charts(s *Summary) ([]Chart, error) {
	ok := okTrials(s)
	if len(ok) == 0 {
		return nil, nil
	}
	m := objectiveMeasure(s)
	var makers []func() ([]Chart, error)
	switch {
	case s.Strategy == StrategyGrid && len(s.SweptKnobs) >= 2:
		makers = append(makers, func() ([]Chart, error) { return gridCharts(s, m) })
	case s.Strategy == StrategyGreedy:
		makers = append(makers, func() ([]Chart, error) { return greedyCharts(s, m) })
	case s.Strategy == StrategyList:
		makers = append(makers, func() ([]Chart, error) { return trialsChart(s, m) })
	default: // one-at-a-time, and a grid over one knob
		makers = append(makers, func() ([]Chart, error) { return knobCharts(s, m) })
	}
	makers = append(makers,
		func() ([]Chart, error) { return one(launchStripChart(s, ok)) },
		func() ([]Chart, error) { return one(breakdownChart(s, ok)) },
		func() ([]Chart, error) { return one(efficiencyChart(s, ok)) },
		func() ([]Chart, error) { return one(memoryChart(s, ok)) })
	var charts []Chart
	for _, mk := range makers {
		cs, err := mk()
		if err != nil {
			return nil, err
		}
		charts = append(charts, cs...)
	}
	return charts, nil
}

func one(c *Chart, err error) ([]Chart, error) {
	if c == nil || err != nil {
		return nil, err
	}
	return []Chart{*c}, nil
}

// newPlot is a plot frame with the report's fonts and a light grid.
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

// plotFont is the report's sans font at size pt.
func plotFont(size float64) font.Font {
	return font.Font{Variant: "Sans", Size: vg.Points(size)}
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

// trialAttrs are the data attributes of a trial's marks.
func trialAttrs(t *Trial, extra ...[2]string) [][2]string {
	return append([][2]string{{"data-trial", t.ID}, {"data-label", labelOf(t)}}, extra...)
}
