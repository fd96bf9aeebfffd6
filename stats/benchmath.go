package stats

import (
	"golang.org/x/perf/benchmath"
)

// Delta is the change of a metric's median from an old sample to a new one,
// with the Mann-Whitney U test (benchstat's comparison).
type Delta struct {
	Old         float64  `json:"old"` // median of the old sample
	New         float64  `json:"new"` // median of the new sample
	Pct         float64  `json:"pct"` // (new/old - 1) * 100; 0 when old is 0
	P           float64  `json:"p"`   // p-value of "same distribution"
	N1          int      `json:"n_old"`
	N2          int      `json:"n_new"`
	Alpha       float64  `json:"alpha"`
	Significant bool     `json:"significant"` // P <= Alpha
	Text        string   `json:"text"`        // "~" when not significant, else "+3.21%"
	Warnings    []string `json:"warnings,omitempty"`
}

// MannWhitney tests whether old and new come from the same distribution
// (benchmath.AssumeNothing: Mann-Whitney U) and measures the change of the
// medians: benchstat's view, a secondary column next to the launch-level
// Welch comparison (Compare). The inputs are not modified.
func MannWhitney(old, new []float64) Delta {
	d := Delta{Alpha: Alpha, N1: len(old), N2: len(new), P: 1, Text: "~"}
	if len(old) == 0 || len(new) == 0 {
		d.Warnings = []string{"no samples to compare"}
		return d
	}
	so := benchmath.NewSample(append([]float64(nil), old...), &Thresholds)
	sn := benchmath.NewSample(append([]float64(nil), new...), &Thresholds)
	d.Old = benchmath.AssumeNothing.Summary(so, Confidence).Center
	d.New = benchmath.AssumeNothing.Summary(sn, Confidence).Center
	c := benchmath.AssumeNothing.Compare(so, sn)
	d.P, d.Alpha = c.P, c.Alpha
	d.Significant = c.P <= c.Alpha
	d.Text = c.FormatDelta(d.Old, d.New)
	if d.Old != 0 {
		d.Pct = (d.New/d.Old - 1) * 100
	}
	for _, w := range c.Warnings {
		d.Warnings = append(d.Warnings, w.Error())
	}
	return d
}
