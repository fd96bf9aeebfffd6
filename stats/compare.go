package stats

import (
	"encoding/json"
	"math"

	"golang.org/x/perf/benchmath"
)

// Delta is the change of a metric from an old sample to a new one, with the
// Mann-Whitney U test's verdict on whether it is more than noise.
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

// Compare tests whether old and new come from the same distribution
// (benchmath.AssumeNothing: Mann-Whitney U) and measures the change of the
// medians. The inputs are not modified.
func Compare(old, new []float64) Delta {
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

// Speedup is how much better the best trial is than the baseline: the ratio
// of medians, oriented so that > 1 is better (throughput: best/base; step
// time: base/best).
//
// Method: the interval combines the two medians' distribution-free
// intervals, Lo = worst end of best over the best end of the baseline and Hi
// the other way round. When each interval holds its true median with
// probability >= c, both hold at once with probability >= 1-2(1-c)
// (Bonferroni), so the ratio interval covers the true ratio of medians with at
// least Confidence (0.90 for two 95% intervals). It is unbounded when either
// sample is too small for an interval. Significance is Mann-Whitney U.
type Speedup struct {
	Ratio       float64  `json:"ratio"`
	Lo          float64  `json:"lo"` // null in JSON when unbounded
	Hi          float64  `json:"hi"` // null in JSON when unbounded
	Confidence  float64  `json:"confidence"`
	P           float64  `json:"p"`
	Significant bool     `json:"significant"`
	Warnings    []string `json:"warnings,omitempty"`
}

// NewSpeedup compares the best trial's samples with the baseline's.
// higherIsBetter is true for throughput-like metrics, false for times.
func NewSpeedup(best, base []float64, higherIsBetter bool) Speedup {
	b, a := Summarize(best), Summarize(base)
	s := Speedup{Lo: math.Inf(-1), Hi: math.Inf(1)}
	s.Confidence = 1 - (1 - b.Confidence) - (1 - a.Confidence)
	num, den := b, a
	if !higherIsBetter {
		num, den = a, b
	}
	if den.Center != 0 {
		s.Ratio = num.Center / den.Center
	}
	if num.Bounded() && den.Bounded() && den.Lo > 0 {
		s.Lo, s.Hi = num.Lo/den.Hi, num.Hi/den.Lo
	} else {
		s.Warnings = append(s.Warnings, "speedup interval unbounded: "+firstWarning(b, a))
	}
	d := Compare(base, best)
	s.P, s.Significant = d.P, d.Significant
	s.Warnings = append(s.Warnings, d.Warnings...)
	return s
}

func firstWarning(es ...Estimate) string {
	for _, e := range es {
		if len(e.Warnings) > 0 {
			return e.Warnings[0]
		}
	}
	return "a median has no interval"
}

// speedupJSON is Speedup with nullable bounds.
type speedupJSON struct {
	Ratio       float64  `json:"ratio"`
	Lo          *float64 `json:"lo"`
	Hi          *float64 `json:"hi"`
	Confidence  float64  `json:"confidence"`
	P           float64  `json:"p"`
	Significant bool     `json:"significant"`
	Warnings    []string `json:"warnings,omitempty"`
}

// MarshalJSON writes unbounded ends as null.
func (s Speedup) MarshalJSON() ([]byte, error) {
	return json.Marshal(speedupJSON{Ratio: finite(s.Ratio), Lo: bound(s.Lo), Hi: bound(s.Hi),
		Confidence: s.Confidence, P: s.P, Significant: s.Significant, Warnings: s.Warnings})
}

// UnmarshalJSON reads null ends as -Inf (lo) and +Inf (hi).
func (s *Speedup) UnmarshalJSON(b []byte) error {
	var j speedupJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Speedup{Ratio: j.Ratio, Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: j.Confidence,
		P: j.P, Significant: j.Significant, Warnings: j.Warnings}
	if j.Lo != nil {
		s.Lo = *j.Lo
	}
	if j.Hi != nil {
		s.Hi = *j.Hi
	}
	return nil
}
