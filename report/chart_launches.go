package report

import (
	"fmt"
	"html/template"
	"image/color"
	"strconv"

	"gonum.org/v1/plot/vg"
)

// launchStripChart: every launch of every finished trial as a dot on the
// objective's axis (launches left out of the statistics as crosses), with
// the trial's value and its interval, so that a trial whose launches
// disagree is seen at once.
func launchStripChart(s *Summary, ok []*Trial) (*Chart, error) {
	var trials []*Trial
	lo, hi := 0.0, 0.0
	for _, t := range ok {
		if len(t.LaunchDetail) == 0 {
			continue
		}
		trials = append(trials, t)
		for _, d := range t.LaunchDetail {
			if d.Value > 0 {
				if lo == 0 || d.Value < lo {
					lo = d.Value
				}
				hi = max(hi, d.Value)
			}
		}
		if t.Value.Bounded() {
			lo, hi = min(lo, t.Value.Lo), max(hi, t.Value.Hi)
		}
	}
	if len(trials) == 0 || hi <= 0 {
		return nil, nil
	}
	n := len(trials)
	labels := make([]string, n)
	for i, t := range trials {
		labels[n-1-i] = barLabel(t)
	}
	unit := s.Metric.Unit
	p := newPlot("Every launch", unit+" per launch (dots), the trial's value and "+PercentConf(s.Confidence)+" interval", "")
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	pad := 0.06 * max(hi-lo, 0.02*hi)
	p.X.Min, p.X.Max = max(0, lo-pad), hi+pad
	p.X.Tick.Marker = niceTicks{}
	f := &figure{p: p, w: chartWidth, h: vg.Length(n)*vg.Points(24) + 0.9*vg.Inch, label: "Every launch of every trial"}
	anyExcluded := false
	for i, t := range trials {
		y := float64(n - 1 - i)
		if v := t.Value; v.Bounded() {
			f.marks = append(f.marks, mark{shape: shapeWhisker, class: "mark interval", x: v.Lo, y: y, x2: v.Hi, y2: y,
				r: vg.Points(4), stroke: colDark, width: vg.Points(1.2), attrs: trialAttrs(t),
				title: fmt.Sprintf("%s (%s): %s %s, %s interval %s", labelOf(t), t.ID, Num(v.Center), unit, PercentConf(s.Confidence), Interval(v))})
		}
		if t.Value.N > 0 {
			f.marks = append(f.marks, mark{shape: shapeDiamond, class: "mark value", x: t.Value.Center, y: y, r: vg.Points(4.5),
				fill: colOrange, stroke: colDark, width: vg.Points(0.6), attrs: trialAttrs(t),
				title: fmt.Sprintf("%s (%s): %s %s over %s", labelOf(t), t.ID, Num(t.Value.Center), unit, nLaunches(t.Value.N))})
		}
		k := len(t.LaunchDetail)
		for j, d := range t.LaunchDetail {
			if d.Value <= 0 {
				continue
			}
			off := 0.0
			if k > 1 {
				off = 0.32 * (float64(j)/float64(k-1) - 0.5)
			}
			m := mark{shape: shapeCircle, class: "mark launch", x: d.Value, y: y + off, r: vg.Points(2.6), fill: colBlue,
				attrs: trialAttrs(t, [2]string{"data-repeat", strconv.Itoa(d.Repeat)}),
				title: fmt.Sprintf("%s (%s) launch %d: %s %s%s", labelOf(t), t.ID, d.Repeat, Num(d.Value), unit, launchTags(d))}
			if d.Excluded != "" {
				m.shape, m.fill, m.stroke, m.width = shapeCross, nil, colRed, vg.Points(1.2)
				anyExcluded = true
			}
			f.marks = append(f.marks, m)
		}
	}
	f.legend = []legendItem{{text: "a launch", shape: shapeCircle, fill: colBlue},
		{text: "trial value", shape: shapeDiamond, fill: colOrange, stroke: colDark}}
	if anyExcluded {
		f.legend = append(f.legend, legendItem{text: "left out (tainted)", shape: shapeCross, stroke: colRed})
	}
	f.legendBelow = true
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "launches", Title: "Every launch", SVG: svg,
		Caption: "Each dot is one launch (a separate process) of the trial; the diamond is the trial's value (geometric mean of its clean launches) " +
			"with its interval. Launches left out of the statistics are crosses. Open a trial under \"Every launch, step by step\" for its steps, SM clock and power."}, nil
}

// launchTags is ", power-capped 75% of the window, 1650 MHz, +4.3% drift" for a tooltip.
func launchTags(d LaunchDetail) string {
	out := ""
	if d.Excluded != "" {
		out += "; left out: " + d.Excluded
	}
	if d.PowerCapped > 0.005 {
		out += fmt.Sprintf("; power-capped %s of the window", Percent(d.PowerCapped))
	}
	if d.SMClockMean > 0 {
		out += fmt.Sprintf("; SM clock %.0f MHz", d.SMClockMean)
	}
	if d.Drift != 0 {
		out += fmt.Sprintf("; last third of the steps %+.1f%% against the first", 100*d.Drift)
	}
	return out
}

// launchSeries is one small chart of a launch over time: x seconds since
// the launch started, the warm-up shaded, the measured window bounded.
type launchSeries struct {
	title, ylabel string
	xlabel        string // "" = seconds since the launch started
	xs, ys        []float64
	flagged       []bool // marked red (power-capped samples)
	col           color.Color
}

// launchFigure draws one series of one launch.
func launchFigure(t *Trial, d LaunchDetail, ser launchSeries) (template.HTML, error) {
	if len(ser.xs) == 0 {
		return "", nil
	}
	xlabel := ser.xlabel
	if xlabel == "" {
		xlabel = "s since the launch started"
	}
	p := newPlot(ser.title, xlabel, ser.ylabel)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	xmin, xmax := ser.xs[0], ser.xs[0]
	ymin, ymax := ser.ys[0], ser.ys[0]
	for i := range ser.xs {
		xmin, xmax = min(xmin, ser.xs[i]), max(xmax, ser.xs[i])
		ymin, ymax = min(ymin, ser.ys[i]), max(ymax, ser.ys[i])
	}
	if d.WindowEnd > 0 {
		xmax = max(xmax, d.WindowEnd)
	}
	if len(d.StepT) > 0 && len(d.WarmupStepMS) > 0 {
		xmin = min(xmin, d.StepT[0]-d.WarmupStepMS[0]/1000)
	}
	pad := 0.08 * max(ymax-ymin, 0.01*max(ymax, 1))
	p.X.Min, p.X.Max = max(0, xmin-0.02*(xmax-xmin)), xmax+0.02*(xmax-xmin)
	if ser.xlabel == "" { // the launch clock: the three charts of a launch share the axis from its start
		p.X.Min = 0
	}
	p.Y.Min, p.Y.Max = max(0, ymin-pad), ymax+pad
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
	f := &figure{p: p, w: 3.3 * vg.Inch, h: 1.9 * vg.Inch, label: fmt.Sprintf("%s, launch %d: %s", labelOf(t), d.Repeat, ser.title)}
	if d.WindowStart > 0 {
		f.marks = append(f.marks, mark{shape: shapeRect, class: "warmup", x: p.X.Min, y: p.Y.Min, x2: d.WindowStart, y2: p.Y.Max,
			fill: color.RGBA{236, 236, 236, 255}, title: "before the measured window: start-up and warm-up steps"})
		f.marks = append(f.marks, mark{shape: shapeSegment, class: "ref window", x: d.WindowEnd, y: p.Y.Min, x2: d.WindowEnd, y2: p.Y.Max,
			stroke: colGrey, width: vg.Points(0.8), dash: true, title: "end of the measured window"})
	}
	line := mark{shape: shapePolyline, class: "line", x: ser.xs[0], y: ser.ys[0], stroke: ser.col, width: vg.Points(1)}
	for i := range ser.xs {
		line.pts = append(line.pts, [2]float64{ser.xs[i], ser.ys[i]})
	}
	f.marks = append(f.marks, line)
	for i := range ser.xs {
		if i < len(ser.flagged) && ser.flagged[i] {
			f.marks = append(f.marks, mark{shape: shapeCircle, class: "mark capped", x: ser.xs[i], y: ser.ys[i], r: vg.Points(1.8),
				fill: colRed, title: fmt.Sprintf("%.2f s: %s %s, power-capped", ser.xs[i], Num(ser.ys[i]), ser.ylabel)})
		}
	}
	return f.svg()
}

// launchFigures are a launch's step time, SM clock and power charts.
func launchFigures(t *Trial, d LaunchDetail) ([]template.HTML, error) {
	steps := launchSeries{title: "step time (grey: warm-up)", ylabel: "ms", xlabel: "step (warm-up from 0)", col: colBlue}
	if len(d.StepT) == 0 { // no measured window on the launch clock (CPU runs): by step
		for i, ms := range append(append([]float64{}, d.WarmupStepMS...), d.StepMS...) {
			steps.xs, steps.ys = append(steps.xs, float64(i)), append(steps.ys, ms)
		}
		if len(d.WarmupStepMS) > 0 && len(steps.ys) > len(d.WarmupStepMS)+1 {
			steps.xs, steps.ys = steps.xs[1:], steps.ys[1:]
		}
		if w := len(d.WarmupStepMS); w > 0 { // the warm-up shaded by step
			d.WindowStart, d.WindowEnd = float64(w)-0.5, float64(len(steps.ys)+1)
		}
	} else if len(d.StepT) == len(d.WarmupStepMS)+len(d.StepMS) {
		steps = launchSeries{title: "step time", ylabel: "ms", xs: d.StepT, col: colBlue}
		steps.ys = append(append(steps.ys, d.WarmupStepMS...), d.StepMS...)
		if len(d.WarmupStepMS) > 0 && len(steps.ys) > len(d.WarmupStepMS)+1 {
			// the first warm-up step (compilation, graph capture) dwarfs the rest: leave it out of the axis
			steps.xs, steps.ys = steps.xs[1:], steps.ys[1:]
		}
	}
	clock := launchSeries{title: "SM clock (red: power-capped)", ylabel: "MHz", col: colGreen}
	power := launchSeries{title: "power", ylabel: "W", col: colOrange}
	for _, g := range d.GPU {
		clock.xs, clock.ys, clock.flagged = append(clock.xs, g.T), append(clock.ys, float64(g.SMClockMHz)), append(clock.flagged, g.PowerCapped)
		power.xs, power.ys, power.flagged = append(power.xs, g.T), append(power.ys, g.PowerW), append(power.flagged, g.PowerCapped)
	}
	var out []template.HTML
	for _, ser := range []launchSeries{steps, clock, power} {
		svg, err := launchFigure(t, d, ser)
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, svg)
		}
	}
	return out, nil
}
