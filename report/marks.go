package report

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot/vg"
)

// markSet collects a sweep chart's marks and remembers which kinds it drew,
// for the legend and the caption.
type markSet struct {
	marks                               []mark
	base, best, missed, hasRef, whisker bool
	verdicts                            map[string]bool
}

// Verdict colours (versus.Verdict); undecided and uncompared trials are blue.
// Only a verdict beyond δ gets full green or red; faster or slower with δ
// not shown is pale; within δ is grey.
var verdictColours = map[string]color.Color{"better": colGreen, "worse": colRed, "same": colGrey, "undecided": colBlue, "": colBlue,
	"better-unresolved": color.RGBA{150, 210, 190, 255}, "worse-unresolved": color.RGBA{238, 180, 150, 255}}

var verdictLegend = map[string]string{
	"better":            "better than the baseline by more than δ",
	"worse":             "worse than the baseline by more than δ",
	"better-unresolved": "better, by δ or less not excluded",
	"worse-unresolved":  "worse, by δ or less not excluded",
	"same":              "within ±δ of the baseline",
	"undecided":         "undecided",
	"":                  "trial",
}

// trial adds a trial's point at (x, v) with its whisker (vertical; horizontal
// puts the value on the x axis): the baseline a grey diamond, the others
// coloured by their verdict, the best ringed.
func (ms *markSet) trial(s *Summary, m measure, t *Trial, x float64, v value, horizontal bool) {
	at := func(pos, val float64) (float64, float64) {
		if horizontal {
			return val, pos
		}
		return pos, val
	}
	vs := versusBaseline(t)
	tip := trialTip(t, m, v, vs)
	attrs := trialAttrs(t, [2]string{"data-x", fmt.Sprint(x)}, [2]string{"data-value", fmt.Sprint(v.center)},
		[2]string{"data-verdict", vs.Verdict})
	col := verdictColours[vs.Verdict]
	if v.bounded {
		x0, y0 := at(x, v.lo)
		x1, y1 := at(x, v.hi)
		ms.marks = append(ms.marks, mark{shape: shapeWhisker, class: "mark whisker", x: x0, y: y0, x2: x1, y2: y1,
			r: vg.Points(4), stroke: col, width: vg.Points(1.2), attrs: trialAttrs(t), title: tip})
		ms.whisker = true
	}
	px, py := at(x, v.center)
	pt := mark{shape: shapeCircle, class: "mark point", x: px, y: py, r: vg.Points(3.5), fill: col, attrs: attrs, title: tip}
	if t.Baseline {
		pt.shape, pt.fill, pt.r = shapeDiamond, colDark, vg.Points(4.5)
		pt.class += " baseline"
		ms.base = true
	} else {
		if ms.verdicts == nil {
			ms.verdicts = map[string]bool{}
		}
		ms.verdicts[vs.Verdict] = true
	}
	ms.marks = append(ms.marks, pt)
	if t.Best {
		ms.marks = append(ms.marks, mark{shape: shapeRing, class: "mark best", x: px, y: py, r: vg.Points(7.5),
			stroke: colOrange, width: vg.Points(1.8), attrs: trialAttrs(t), title: tip})
		ms.best = true
	}
}

// miss marks a trial that did not finish: a cross at (x, at) and its outcome.
func (ms *markSet) miss(t *Trial, x, at float64, horizontal bool) {
	px, py := x, at
	if horizontal {
		px, py = at, x
	}
	tip := fmt.Sprintf("%s (%s): %s: %s", labelOf(t), t.ID, t.Outcome, t.Error)
	ms.marks = append(ms.marks,
		mark{shape: shapeCross, class: "mark miss", x: px, y: py, r: vg.Points(4), stroke: colRed, width: vg.Points(1.6),
			attrs: trialAttrs(t, [2]string{"data-x", fmt.Sprint(x)}, [2]string{"data-outcome", string(t.Outcome)}), title: tip},
		mark{shape: shapeText, class: "label", x: px, y: py, r: vg.Points(8), dy: vg.Points(-8), anchor: "middle",
			text: string(t.Outcome), fill: colRed, title: tip})
	ms.missed = true
}

// ref adds a dashed reference line from (x0, y0) to (x1, y1).
func (ms *markSet) ref(x0, y0, x1, y1 float64, name string) {
	ms.marks = append(ms.marks, mark{shape: shapeSegment, class: "ref", x: x0, y: y0, x2: x1, y2: y1,
		stroke: colGrey, width: vg.Points(1), dash: true, title: name})
	ms.hasRef = true
}

func (ms *markSet) legendItems() []legendItem {
	var out []legendItem
	if ms.base {
		out = append(out, legendItem{text: "baseline", shape: shapeDiamond, fill: colDark})
	}
	for _, v := range []string{"", "better", "better-unresolved", "same", "worse-unresolved", "worse", "undecided"} {
		if ms.verdicts[v] {
			out = append(out, legendItem{text: verdictLegend[v], shape: shapeCircle, fill: verdictColours[v]})
		}
	}
	if ms.best {
		out = append(out, legendItem{text: "best", shape: shapeRing, stroke: colOrange})
	}
	if ms.missed {
		out = append(out, legendItem{text: "did not finish", shape: shapeCross, stroke: colRed})
	}
	if ms.hasRef {
		out = append(out, legendItem{text: "baseline level", shape: shapeSegment, stroke: colGrey, dash: true})
	}
	return out
}

// caption says what the whiskers are.
func (ms *markSet) caption(m measure) string {
	if ms.whisker {
		return "Each point is the trial's value (the geometric mean over its launches); whiskers: its " + m.conf +
			" interval, none for a trial with one launch. Hover a point for its numbers and its verdict against the baseline."
	}
	return "Each point is the trial's value (the geometric mean over its launches); no whiskers: no trial has two " +
		"launches or more, so there is no interval (run repeats: 3 or more). Hover a point for its numbers."
}

// trialTip is a mark's tooltip: label, ID, value, interval, vs baseline.
func trialTip(t *Trial, m measure, v value, vs versus) string {
	tip := fmt.Sprintf("%s (%s): %s %s", labelOf(t), t.ID, Num(v.center), m.unit)
	if v.bounded {
		tip += fmt.Sprintf(", %s interval %s–%s", m.conf, Num(v.lo), Num(v.hi))
	}
	if v.n > 0 {
		tip += ", " + nLaunches(v.n)
	}
	if vs.Ratio > 0 {
		tip += fmt.Sprintf("; %s vs baseline", Ratio(vs.Ratio))
		if vs.Hi > 0 {
			tip += fmt.Sprintf(" [%.2f, %.2f]", vs.Lo, vs.Hi)
		}
		if vs.Text != "" {
			tip += ": " + vs.Text
		}
	}
	return tip
}
