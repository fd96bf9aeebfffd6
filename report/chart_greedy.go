package report

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"gonum.org/v1/plot/vg"
)

// greedyRound is one round of a greedy sweep: the knob it tuned, the trials
// it compared (the configuration it started from and that configuration with
// the knob at each value) and the one it kept.
type greedyRound struct {
	knob       string
	candidates []*Trial
	chosen     *Trial
}

// greedyPath replays a greedy sweep from its results the way the runner
// drives it (runner/greedy.go): from the baseline, each knob in the study's
// order, keeping the best finished trial of each round. nil when the
// baseline is not among the trials.
func greedyPath(s *Summary, m measure) []greedyRound {
	var current *Trial
	for i := range s.Trials {
		if s.Trials[i].Baseline {
			current = &s.Trials[i]
		}
	}
	if current == nil {
		return nil
	}
	rounds := []greedyRound{{candidates: []*Trial{current}, chosen: current}}
	for _, k := range s.SweptKnobs {
		r := greedyRound{knob: k, chosen: current}
		for i := range s.Trials {
			if t := &s.Trials[i]; sameExcept(t.Knobs, current.Knobs, k) {
				r.candidates = append(r.candidates, t)
			}
		}
		if len(r.candidates) < 2 {
			continue // the round had nothing to compare
		}
		ax := newKnobAxis(k, knobValuesOf(r.candidates, k), valueOrder(s, k))
		slices.SortStableFunc(r.candidates, func(a, b *Trial) int {
			return slices.Index(ax.values, a.Knobs[k]) - slices.Index(ax.values, b.Knobs[k])
		})
		best, bestV := (*Trial)(nil), 0.0
		for _, t := range r.candidates {
			if v, ok := m.of(t); ok && (best == nil || (m.higher && v.center > bestV) || (!m.higher && v.center < bestV)) {
				best, bestV = t, v.center
			}
		}
		if best != nil {
			r.chosen, current = best, best
		}
		rounds = append(rounds, r)
	}
	return rounds
}

func sameExcept(a, b map[string]string, knob string) bool {
	keys := slices.Collect(maps.Keys(a))
	keys = append(keys, slices.Collect(maps.Keys(b))...)
	for _, k := range keys {
		if k != knob && a[k] != b[k] {
			return false
		}
	}
	return true
}

func knobValuesOf(trials []*Trial, knob string) []string {
	var out []string
	for _, t := range trials {
		out = append(out, t.Knobs[knob])
	}
	return out
}

// greedyCharts draws the path a greedy sweep took: per round, the trials it
// compared (labelled by the tuned knob's value) and the line through the
// ones it kept.
func greedyCharts(s *Summary, m measure) ([]Chart, error) {
	rounds := greedyPath(s, m)
	if len(rounds) < 2 {
		return knobCharts(s, m)
	}
	names := []string{"start: baseline"}
	for i, r := range rounds[1:] {
		names = append(names, strconv.Itoa(i+1)+". "+r.knob)
	}
	title := m.title() + ": the greedy path"
	p := newPlot(title, "round (the knob it tuned)", m.axis())
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(rounds))-0.5
	f := &figure{p: p, w: chartWidth, h: 3.6 * vg.Inch, label: title, headroom: true}
	ms := &markSet{}
	top := 0.0
	var path [][2]float64
	for ri, r := range rounds {
		n := len(r.candidates)
		step := 0.0
		if n > 1 {
			step = min(0.7/float64(n-1), 0.22)
		}
		for j, t := range r.candidates {
			x := float64(ri) + step*(float64(j)-float64(n-1)/2)
			v, ok := m.of(t)
			if !ok {
				ms.miss(t, x, 0, false)
				continue
			}
			top = max(top, v.center)
			if v.bounded {
				top = max(top, v.hi)
			}
			ms.trial(s, m, t, x, v, false)
			if r.knob != "" {
				ms.marks = append(ms.marks, mark{shape: shapeText, class: "label", x: x, y: v.center, r: vg.Points(8),
					dy: vg.Points(-9), anchor: "middle", text: t.Knobs[r.knob], title: r.knob + "=" + t.Knobs[r.knob]})
			}
			if t == r.chosen {
				path = append(path, [2]float64{x, v.center})
			}
		}
	}
	for i := 1; i < len(path); i++ {
		ms.marks = append(ms.marks, mark{shape: shapeSegment, class: "mark segment path", x: path[i-1][0], y: path[i-1][1],
			x2: path[i][0], y2: path[i][1], stroke: colOrange, width: vg.Points(1.6), title: "the configuration kept after each round"})
	}
	p.Y.Min, p.Y.Max = 0, niceMax(top)
	p.Y.Tick.Marker = niceTicks{}
	f.marks, f.legend = ms.marks, ms.legendItems()
	if len(path) > 1 {
		f.legend = append(f.legend, legendItem{text: "kept after each round", shape: shapeSegment, stroke: colOrange})
	}
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return []Chart{{ID: "greedy", Title: title, SVG: svg,
		Caption: fmt.Sprintf("Round by round, the trials the greedy sweep compared (labelled by the value of the knob it tuned) "+
			"and the line through the one it kept, replayed from the results by %s. %s", m.name, ms.caption(m))}}, nil
}
