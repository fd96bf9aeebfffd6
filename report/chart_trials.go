package report

import (
	"fmt"

	"gonum.org/v1/plot/vg"
)

// trialsChart draws a list sweep trial by trial: each trial's value with its
// interval on one row, labelled by the knob values it changes, the baseline
// as a dashed line.
func trialsChart(s *Summary, m measure) ([]Chart, error) {
	trials := make([]*Trial, 0, len(s.Trials))
	for i := range s.Trials {
		trials = append(trials, &s.Trials[i])
	}
	n := len(trials)
	labels := make([]string, n)
	for i, t := range trials {
		labels[n-1-i] = barLabel(t)
	}
	title := m.title() + " per trial"
	p := newPlot(title, m.axis(), "")
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	f := &figure{p: p, w: chartWidth, h: vg.Length(n)*vg.Points(21) + 1.1*vg.Inch, label: title, legendBelow: true}
	ms := &markSet{}
	top := 0.0
	var base *value
	for i, t := range trials {
		y := float64(n - 1 - i)
		v, ok := m.of(t)
		if !ok {
			ms.miss(t, y, 0, true)
			continue
		}
		top = max(top, v.center)
		if v.bounded {
			top = max(top, v.hi)
		}
		if t.Baseline {
			b := v
			base = &b
		}
		ms.trial(s, m, t, y, v, true)
	}
	p.X.Min, p.X.Max = 0, niceMax(top)
	p.X.Tick.Marker = niceTicks{}
	if base != nil {
		ms.ref(base.center, p.Y.Min, base.center, p.Y.Max, "baseline level")
	}
	f.marks, f.legend = ms.marks, ms.legendItems()
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return []Chart{{ID: "trials", Title: title, SVG: svg,
		Caption: fmt.Sprintf("Every trial of the list, labelled by the knobs it changes from the baseline. %s", ms.caption(m))}}, nil
}
