package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	knobreg "github.com/casestudy/casestudy/knobs"
)

// knobCharts draws a one-at-a-time sweep: per knob, the baseline and the
// trials that change that knob alone, at their true positions on the knob's
// axis, each with its interval. (A trial that changes another swept knob
// too is in no knob's chart: it would look as if this knob made its
// difference.)
func knobCharts(s *Summary, m measure) ([]Chart, error) {
	if len(s.Trials) == 0 {
		return nil, nil
	}
	ref := s.Trials[0].Knobs // the baseline's values; the first trial's when the baseline was not planned
	for i := range s.Trials {
		if s.Trials[i].Baseline {
			ref = s.Trials[i].Knobs
		}
	}
	var charts []Chart
	for _, k := range s.SweptKnobs {
		var members []*Trial
		for i := range s.Trials {
			if t := &s.Trials[i]; sameSweptExcept(s, t.Knobs, ref, k) {
				members = append(members, t)
			}
		}
		var vals []string
		for _, t := range members {
			vals = append(vals, t.Knobs[k])
		}
		ax := newKnobAxis(k, vals, valueOrder(s, k))
		if len(ax.values) < 2 {
			continue
		}
		c, err := knobChart(s, m, k, ax, members)
		if err != nil {
			return nil, err
		}
		charts = append(charts, *c)
	}
	return charts, nil
}

func knobChart(s *Summary, m measure, knob string, ax knobAxis, members []*Trial) (*Chart, error) {
	title := m.title() + " vs " + knob
	p := newPlot(title, ax.axisLabel(), m.axis())
	ax.apply(&p.X)
	f := &figure{p: p, w: chartWidth, h: 3.4 * vg.Inch, label: title + ": the baseline and the trials that change " + knob + " only", headroom: true}
	top := 0.0
	var base *value
	marks := &markSet{}
	for _, t := range members {
		x := ax.pos[t.Knobs[knob]]
		v, ok := m.of(t)
		if !ok {
			marks.miss(t, x, 0, false)
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
		marks.trial(s, m, t, x, v, false)
	}
	p.Y.Min, p.Y.Max = 0, niceMax(top)
	p.Y.Tick.Marker = niceTicks{}
	if base != nil {
		marks.ref(p.X.Min, base.center, p.X.Max, base.center, "baseline level")
	}
	f.marks, f.legend = marks.marks, marks.legendItems()
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "knob-" + knob, Title: title, SVG: svg,
		Caption: fmt.Sprintf("The baseline and each trial that changes %s alone, at its value of %s%s. %s",
			knob, knob, ax.note(), marks.caption(m))}, nil
}

// valueOrder is the order a knob's values are drawn in when they are not
// numbers: the registry's domain for enums (fp32, tf32, bf16, fp16; Ring,
// Tree, ...), else the order the study lists them in.
func valueOrder(s *Summary, knob string) []string {
	if k, ok := knobreg.Lookup(knob); ok && k.Type == knobreg.Enum {
		return k.Values
	}
	return s.sweepValues[knob]
}

// sameSweptExcept: a and b agree on every swept knob but knob.
func sameSweptExcept(s *Summary, a, b map[string]string, knob string) bool {
	for _, k := range s.SweptKnobs {
		if k != knob && a[k] != b[k] {
			return false
		}
	}
	return true
}

// niceMax is a little above v, so that the top whisker is not on the frame.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	return 1.08 * v
}

// knobAxis places a knob's values: numbers at their value (on a log2 scale
// for powers of two and wide ranges), other values in the study's order.
type knobAxis struct {
	name    string
	values  []string // in axis order
	pos     map[string]float64
	numeric bool
	log     bool
}

func newKnobAxis(knob string, vals, listed []string) knobAxis {
	ax := knobAxis{name: knob, pos: map[string]float64{}, numeric: true}
	seen := map[string]bool{}
	for _, v := range append(slices.Clone(listed), vals...) {
		if !slices.Contains(vals, v) || seen[v] {
			continue
		}
		seen[v] = true
		ax.values = append(ax.values, v)
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			ax.numeric = false
		}
	}
	if !ax.numeric {
		for i, v := range ax.values {
			ax.pos[v] = float64(i)
		}
		return ax
	}
	num := func(v string) float64 { f, _ := strconv.ParseFloat(v, 64); return f }
	sort.SliceStable(ax.values, func(i, j int) bool { return num(ax.values[i]) < num(ax.values[j]) })
	lo, hi := num(ax.values[0]), num(ax.values[len(ax.values)-1])
	pow2 := len(ax.values) >= 3
	for _, v := range ax.values {
		f := num(v)
		ax.pos[v] = f
		if f <= 0 || math.Abs(math.Log2(f)-math.Round(math.Log2(f))) > 1e-9 {
			pow2 = false
		}
	}
	ax.log = lo > 0 && (pow2 || hi/lo >= 16)
	return ax
}

// apply sets the plot axis: range with a margin, scale and a tick per value.
func (ax knobAxis) apply(a *plot.Axis) {
	var ticks []plot.Tick
	for _, v := range ax.values {
		ticks = append(ticks, plot.Tick{Value: ax.pos[v], Label: v})
	}
	a.Tick.Marker = plot.ConstantTicks(ticks)
	if !ax.numeric {
		a.Min, a.Max = -0.5, float64(len(ax.values))-0.5
		return
	}
	lo, hi := ax.pos[ax.values[0]], ax.pos[ax.values[len(ax.values)-1]]
	if ax.log {
		a.Scale = plot.LogScale{}
		f := math.Pow(hi/lo, 0.07)
		a.Min, a.Max = lo/f, hi*f
		return
	}
	pad := 0.07 * (hi - lo)
	a.Min, a.Max = lo-pad, hi+pad
}

func (ax knobAxis) axisLabel() string {
	if ax.log {
		return ax.name + " (log scale)"
	}
	return ax.name
}

func (ax knobAxis) note() string {
	switch {
	case ax.log:
		return " (a log scale: equal steps are equal ratios)"
	case ax.numeric:
		return " (a linear scale)"
	}
	return ""
}
