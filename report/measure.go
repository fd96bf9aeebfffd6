package report

import (
	"strings"

	"github.com/casestudy/casestudy/stats"
)

// measure is what the sweep charts plot for each trial: the study's
// objective (Summary.Metric), in its unit, as package stats computed it: the
// trial's one number (Trial.Value) with its interval. (This package imports
// package measure as meas.)
type measure struct {
	name   string // "throughput"
	unit   string // "samples/s"
	higher bool   // higher is better
	conf   string // the intervals' confidence: "95%"
	of     func(*Trial) (value, bool)
}

// value is a trial's measure: its centre and, when it has one, the interval.
type value struct {
	center, lo, hi float64
	bounded        bool
	n              int
}

func fromValue(v stats.Value, scale float64) value {
	return value{center: scale * v.Center, lo: scale * v.Lo, hi: scale * v.Hi, bounded: v.Bounded(), n: v.N}
}

// objectiveMeasure is the summary's metric as the charts draw it. Memory is
// drawn in GiB; MFU in percent of the one bf16 peak (the objective's value is
// measured against it, so that precisions compare).
func objectiveMeasure(s *Summary) measure {
	m := s.Metric
	if m.Name == "" { // a summary without a metric: throughput
		m = stats.Metrics["throughput"]
	}
	scale := 1.0
	unit, name := m.Unit, strings.ReplaceAll(m.Name, "_", " ")
	switch m.Name {
	case "throughput", "tokens_per_s":
		name = "throughput"
	case "step_time":
		name = "step time"
	case "memory":
		unit, name = "GiB", "peak memory"
		scale = 1.0 / (1 << 30)
	case "tflops":
		name = "achieved TFLOP/s"
	case "mfu":
		// The value is already against the one bf16 peak (measure.LaunchValue).
		name, unit = "MFU", "% of "+MFUBasis
		scale = 100
	}
	return measure{name: name, unit: unit, higher: m.HigherIsBetter, conf: PercentConf(s.Confidence), of: func(t *Trial) (value, bool) {
		if !t.OK() {
			return value{}, false
		}
		return fromValue(t.Value, scale), t.Value.Center > 0
	}}
}

// title is "Throughput".
func (m measure) title() string {
	return strings.ToUpper(m.name[:1]) + m.name[1:]
}

// axis is the value axis label: "samples/s".
func (m measure) axis() string {
	switch {
	case m.unit == "ms":
		return "step time, ms"
	case strings.HasPrefix(m.unit, "%"):
		return "MFU (" + m.unit + ")"
	}
	return m.unit
}

// versus is a trial against the baseline as the charts and the table show
// it, from the statistics (Trial.VsBaseline). Ratio is oriented so that > 1
// is better.
type versus struct {
	Ratio   float64 // 0 when there is no comparison
	Lo, Hi  float64 // the ratio's interval, 0 when it has none
	Verdict string  // better | worse (by more than δ) | better-unresolved | worse-unresolved | same (within δ) | undecided | "" (no comparison)
	Text    string  // the statistics' words: "faster", "undecided (needs ~12 more launches)"
}

func versusBaseline(t *Trial) versus {
	c := t.VsBaseline
	if c == nil || c.Ratio <= 0 {
		return versus{}
	}
	v := versus{Ratio: c.Ratio, Text: c.VerdictText()}
	if c.Bounded() {
		v.Lo, v.Hi = c.Lo, c.Hi
	}
	switch {
	case c.Winner(): // only "by more than δ" is a win or a loss in colour
		v.Verdict = "better"
	case c.Loser():
		v.Verdict = "worse"
	case c.Verdict == stats.Better:
		v.Verdict = "better-unresolved"
	case c.Verdict == stats.Worse:
		v.Verdict = "worse-unresolved"
	case c.Verdict == stats.NoDifference:
		v.Verdict = "same"
	default:
		v.Verdict = "undecided"
	}
	return v
}
