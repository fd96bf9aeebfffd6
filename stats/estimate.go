// Package stats turns a run's launches into verdicts. The launch (a separate
// process) is the replicate: one value per launch of the study's objective
// (measure.LaunchValue), never one per step. A trial's number is the geometric
// mean over its clean launches (Value); a trial against the baseline is the
// ratio of geometric means with Welch's t interval on log values and a
// verdict against the study's threshold δ (Compare). The sequential design of
// repeats: auto (Design, Schedule) decides how many launches that takes.
// benchmath's median and Mann-Whitney U stay as secondary numbers, as
// benchstat shows them. The package computes; it never writes. It works on
// plain Go values and knows no storage type: package measure reads the
// values it needs (launch values, designs, summaries) from stored records.
package stats

import (
	"encoding/json"
	"math"

	"golang.org/x/perf/benchmath"
)

// Confidence is the level of every interval this package computes.
const Confidence = 0.95

// Alpha is the two-sided false-positive rate of a comparison decided at one
// look (a fixed number of launches), and the overall rate the sequential
// design keeps (Design).
const Alpha = 0.05

// Thresholds are the benchmath thresholds used for every sample.
var Thresholds = benchmath.Thresholds{CompareAlpha: Alpha}

// Estimate is a sample's median with its distribution-free confidence
// interval (secondary: benchstat's number) (benchmath.AssumeNothing: order statistics of the sample).
// Lo and Hi are -Inf/+Inf when the sample is too small for an interval at
// this level (fewer than 6 values at 95%); Warnings then says so.
type Estimate struct {
	Center     float64  `json:"center"`
	Lo         float64  `json:"lo"` // null in JSON when unbounded
	Hi         float64  `json:"hi"` // null in JSON when unbounded
	Confidence float64  `json:"confidence"`
	N          int      `json:"n"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Bounded reports whether both ends of the interval are finite.
func (e Estimate) Bounded() bool {
	return e.N > 0 && !math.IsInf(e.Lo, 0) && !math.IsInf(e.Hi, 0)
}

// MinMedianCI is the fewest values with a distribution-free interval of the
// median at the report's confidence: below it MedianCI gives the median alone
// (benchmath's interval would be half-bounded, at a lower confidence of its
// own, beside the 95-99% intervals of the geometric means).
const MinMedianCI = 6

// MedianCI is the median of values with its confidence interval. values is
// not modified.
func MedianCI(values []float64) Estimate {
	if len(values) == 0 {
		return Estimate{Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: Confidence,
			Warnings: []string{"no samples"}}
	}
	s := benchmath.NewSample(append([]float64(nil), values...), &Thresholds)
	sum := benchmath.AssumeNothing.Summary(s, Confidence)
	e := Estimate{Center: sum.Center, Lo: sum.Lo, Hi: sum.Hi, Confidence: sum.Confidence, N: len(values)}
	for _, w := range sum.Warnings {
		e.Warnings = append(e.Warnings, w.Error())
	}
	if len(values) < MinMedianCI { // benchmath's interval is half-bounded or absent below 6 values
		e.Lo, e.Hi, e.Confidence = math.Inf(-1), math.Inf(1), 0
	}
	return e
}

// estimateJSON is Estimate with nullable bounds: JSON has no infinities.
type estimateJSON struct {
	Center     float64  `json:"center"`
	Lo         *float64 `json:"lo"`
	Hi         *float64 `json:"hi"`
	Confidence float64  `json:"confidence"`
	N          int      `json:"n"`
	Warnings   []string `json:"warnings,omitempty"`
}

// MarshalJSON writes unbounded ends as null.
func (e Estimate) MarshalJSON() ([]byte, error) {
	return json.Marshal(estimateJSON{Center: finite(e.Center), Lo: bound(e.Lo), Hi: bound(e.Hi),
		Confidence: e.Confidence, N: e.N, Warnings: e.Warnings})
}

// UnmarshalJSON reads null ends as -Inf (lo) and +Inf (hi).
func (e *Estimate) UnmarshalJSON(b []byte) error {
	var j estimateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Estimate{Center: j.Center, Lo: math.Inf(-1), Hi: math.Inf(1), Confidence: j.Confidence,
		N: j.N, Warnings: j.Warnings}
	if j.Lo != nil {
		e.Lo = *j.Lo
	}
	if j.Hi != nil {
		e.Hi = *j.Hi
	}
	return nil
}

func bound(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}
