package report

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/vg"
)

// maxPanels caps the small multiples of a grid over more than two knobs.
const maxPanels = 12

// gridCells is what one heatmap cell holds: a trial (any outcome) or the
// reason its combination was dropped.
type gridCells struct {
	trials  map[string]*Trial
	dropped map[string]string
}

func cellKey(knobs map[string]string, names []string) string {
	var parts []string
	for _, k := range names {
		parts = append(parts, k+"="+knobs[k])
	}
	return strings.Join(parts, ", ")
}

// gridCharts draws a grid sweep as heatmaps: the first swept knob down, the
// second across, one heatmap per combination of the other swept knobs (small
// multiples, at most maxPanels).
func gridCharts(s *Summary, m measure) ([]Chart, error) {
	rowK, colK, rest := s.SweptKnobs[0], s.SweptKnobs[1], s.SweptKnobs[2:]
	vals := map[string][]string{}
	cells := gridCells{trials: map[string]*Trial{}, dropped: map[string]string{}}
	var panels []string
	seenPanel := map[string]bool{}
	add := func(knobs map[string]string) {
		for _, k := range s.SweptKnobs {
			vals[k] = append(vals[k], knobs[k])
		}
		if pk := cellKey(knobs, rest); !seenPanel[pk] {
			seenPanel[pk] = true
			panels = append(panels, pk)
		}
	}
	all := append(append([]string{}, rest...), rowK, colK)
	for i := range s.Trials {
		t := &s.Trials[i]
		add(t.Knobs)
		cells.trials[cellKey(t.Knobs, all)] = t
	}
	for _, d := range s.Dropped {
		if !hasAll(d.Knobs, s.SweptKnobs) {
			continue
		}
		add(d.Knobs)
		cells.dropped[cellKey(d.Knobs, all)] = d.Reason
	}
	rows := newKnobAxis(rowK, vals[rowK], valueOrder(s, rowK)).values
	cols := newKnobAxis(colK, vals[colK], valueOrder(s, colK)).values
	cmap, scaleNote := gridColours(s, m)
	var charts []Chart
	for i, pk := range panels {
		if i == maxPanels {
			break
		}
		c, err := heatmap(s, m, rowK, colK, rows, cols, pk, cells, cmap)
		if err != nil {
			return nil, err
		}
		c.ID = fmt.Sprintf("grid-%d", i+1)
		c.Caption = fmt.Sprintf("Each cell is the trial with that %s and %s: its value (%s, the geometric mean over its launches) "+
			"and its ratio to the baseline (~: within ±δ; ?: undecided; hover for the interval and the verdict). %s",
			rowK, colK, m.unit, scaleNote)
		if len(panels) > maxPanels && i == maxPanels-1 {
			c.Caption += fmt.Sprintf(" %d more panels are not drawn: the trials table has every trial.", len(panels)-maxPanels)
		}
		charts = append(charts, *c)
	}
	return charts, nil
}

func hasAll(knobs map[string]string, names []string) bool {
	for _, k := range names {
		if _, ok := knobs[k]; !ok {
			return false
		}
	}
	return true
}

// cellColour maps a trial's measure to a fill.
type cellColour func(*Trial) (color.Color, bool)

// gridColours colours a cell by its ratio to the baseline (diverging: blue
// better, red worse, white equal), or by value when the baseline did not
// finish (a sequential map).
func gridColours(s *Summary, m measure) (cellColour, string) {
	base := baselineTrial(s)
	var logs, values []float64
	for i := range s.Trials {
		t := &s.Trials[i]
		if v, ok := m.of(t); ok && v.center > 0 {
			values = append(values, v.center)
			if vs := versusBaseline(t); vs.Ratio > 0 {
				logs = append(logs, math.Log(vs.Ratio))
			}
		}
	}
	if base != nil && len(logs) > 0 {
		span := 0.05
		for _, l := range logs {
			span = max(span, math.Abs(l))
		}
		cm := moreland.SmoothBlueRed()
		cm.SetMin(-span)
		cm.SetMax(span)
		return func(t *Trial) (color.Color, bool) {
				if t.Baseline {
					return at(cm, 0), true
				}
				vs := versusBaseline(t)
				if vs.Ratio <= 0 {
					return nil, false
				}
				return at(cm, -math.Log(vs.Ratio)), true
			}, fmt.Sprintf("Colour: the ratio to the baseline, blue better, red worse (full colour at %s).",
				Ratio(math.Exp(span)))
	}
	if len(values) == 0 {
		return func(*Trial) (color.Color, bool) { return nil, false }, ""
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	cm := moreland.Kindlmann()
	cm.SetMin(lo)
	cm.SetMax(max(hi, lo*1.0001))
	return func(t *Trial) (color.Color, bool) {
		v, ok := m.of(t)
		if !ok {
			return nil, false
		}
		return at(cm, v.center), true
	}, "Colour: the value (the baseline did not finish, so there is no ratio)."
}

func at(cm palette.ColorMap, v float64) color.Color {
	v = max(cm.Min(), min(cm.Max(), v))
	c, err := cm.At(v)
	if err != nil {
		return colGrey
	}
	return c
}

func heatmap(s *Summary, m measure, rowK, colK string, rows, cols []string, panel string, cells gridCells, colour cellColour) (*Chart, error) {
	title := fmt.Sprintf("%s: %s × %s", m.title(), rowK, colK)
	if panel != "" {
		title += " (" + panel + ")"
	}
	nr, nc := len(rows), len(cols)
	ylabels := make([]string, nr)
	for i, r := range rows {
		ylabels[nr-1-i] = r
	}
	p := newPlot(title, colK, rowK)
	p.NominalX(cols...)
	p.NominalY(ylabels...)
	p.X.Min, p.X.Max = -0.5, float64(nc)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(nr)-0.5
	f := &figure{p: p, w: chartWidth, h: vg.Length(nr)*vg.Points(40) + 0.9*vg.Inch, label: title}
	restKnobs := map[string]string{}
	for _, kv := range strings.Split(panel, ", ") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			restKnobs[k] = v
		}
	}
	var rest []string
	for _, k := range s.SweptKnobs[2:] {
		rest = append(rest, k)
	}
	all := append(append([]string{}, rest...), rowK, colK)
	for ri, r := range rows {
		for ci, c := range cols {
			knobs := map[string]string{rowK: r, colK: c}
			for k, v := range restKnobs {
				knobs[k] = v
			}
			key := cellKey(knobs, all)
			x, y := float64(ci), float64(nr-1-ri)
			rect := mark{shape: shapeRect, class: "mark cell", x: x - 0.48, y: y - 0.46, x2: x + 0.48, y2: y + 0.46,
				attrs: [][2]string{{"data-row", r}, {"data-col", c}}}
			text := func(line string, dy float64, col color.Color) mark {
				return mark{shape: shapeText, class: "label", x: x, y: y, r: vg.Points(9), dy: vg.Points(dy), anchor: "middle", text: line, fill: col}
			}
			t := cells.trials[key]
			switch {
			case t != nil && t.OK():
				fill, ok := colour(t)
				if !ok {
					fill = color.RGBA{235, 235, 235, 255}
				}
				v, _ := m.of(t)
				vs := versusBaseline(t)
				if !t.Baseline && vs.Verdict == "undecided" {
					fill = washOut(fill) // an undecided ratio is not shown at the strength of a decided one
					rect.class = "mark cell undecided"
				}
				rect.fill, rect.title = fill, trialTip(t, m, v, vs)
				rect.attrs = append(trialAttrs(t, [2]string{"data-value", fmt.Sprint(v.center)}, [2]string{"data-verdict", vs.Verdict}), rect.attrs...)
				if t.Best {
					rect.stroke, rect.width = colOrange, vg.Points(2.5)
				}
				ink := inkOn(fill)
				second := "baseline"
				if !t.Baseline {
					second = Ratio(vs.Ratio)
					switch vs.Verdict {
					case "same":
						second += " ~"
					case "undecided":
						second += " ?"
					}
				}
				if t.Best {
					second += " ★"
				}
				f.marks = append(f.marks, rect, text(Num(v.center), -1, ink), text(second, 10, ink))
			case t != nil:
				rect.fill, rect.title = color.RGBA{250, 228, 222, 255}, fmt.Sprintf("%s (%s): %s: %s", labelOf(t), t.ID, t.Outcome, t.Error)
				rect.attrs = append(trialAttrs(t, [2]string{"data-outcome", string(t.Outcome)}), rect.attrs...)
				f.marks = append(f.marks, rect, text(string(t.Outcome), 4, colRed))
			case cells.dropped[key] != "":
				rect.class = "mark cell dropped"
				rect.fill, rect.title = color.RGBA{245, 245, 245, 255}, "dropped before running: "+cells.dropped[key]
				f.marks = append(f.marks, rect, text("dropped", 4, colGrey))
			}
		}
	}
	svg, err := f.svg()
	if err != nil {
		return nil, err
	}
	return &Chart{Title: title, SVG: svg}, nil
}

// inkOn is black or white text, whichever reads on fill.
func inkOn(fill color.Color) color.Color {
	r, g, b, _ := fill.RGBA()
	lum := (0.2126*float64(r) + 0.7152*float64(g) + 0.0722*float64(b)) / 65535
	if lum < 0.45 {
		return color.White
	}
	return color.RGBA{20, 20, 20, 255}
}
