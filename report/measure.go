package report

import (
	"strings"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// measure is what the sweep charts plot for each trial: the study's
// objective, in its own unit.
type measure struct {
	name   string // "throughput"
	unit   string // "samples/s"
	higher bool   // higher is better
	of     func(*Trial) (value, bool)
}

// value is a trial's measure: its centre and, when the sample allows one,
// the interval.
type value struct {
	center, lo, hi float64
	bounded        bool
	n              int
}

func fromEstimate(e stats.Estimate, scale float64) value {
	return value{center: scale * e.Center, lo: scale * e.Lo, hi: scale * e.Hi, bounded: e.Bounded(), n: e.N}
}

// objectiveMeasure maps the study's objective to a measure: samples/s
// (default), tokens/s, step time (ms), or MFU against the one bf16 peak
// (achieved TFLOP/s when the peak is unknown). Throughput, tokens/s and step
// time carry their 95% intervals; MFU and TFLOP/s are plain values.
func objectiveMeasure(s *Summary) measure {
	switch strings.ToLower(s.Objective.Metric) {
	case "tokens_per_s":
		return measure{name: "throughput", unit: "tokens/s", higher: true, of: func(t *Trial) (value, bool) {
			if !t.OK() || t.TokensPerS <= 0 {
				return value{}, false
			}
			return fromEstimate(t.Throughput, tokensPerSample(t)), true // the same samples, in tokens
		}}
	case "step_time", "step_ms":
		return measure{name: "step time", unit: "ms", of: func(t *Trial) (value, bool) {
			if !t.OK() || len(t.Samples.StepMS) == 0 {
				return value{}, false
			}
			return fromEstimate(stats.Summarize(t.Samples.StepMS), 1), true
		}}
	case "mfu", "tflops":
		if s.MFUPeak != nil {
			return measure{name: "MFU", unit: "% of " + MFUBasis, higher: true, of: func(t *Trial) (value, bool) {
				return value{center: 100 * t.MFUBF16}, t.OK() && t.MFUBF16 > 0
			}}
		}
		return measure{name: "achieved TFLOP/s", unit: "TFLOP/s per GPU", higher: true, of: func(t *Trial) (value, bool) {
			return value{center: t.TFLOPS}, t.OK() && t.TFLOPS > 0
		}}
	}
	return measure{name: "throughput", unit: "samples/s", higher: true, of: func(t *Trial) (value, bool) {
		if !t.OK() {
			return value{}, false
		}
		return fromEstimate(t.Throughput, 1), true
	}}
}

// recordedTokensPerSample is the tokens per sample of a trial's first
// measured step (0 when it counts no tokens: images).
func recordedTokensPerSample(rec *store.TrialRecord) int {
	for _, rep := range rec.Repeats {
		for _, rk := range rep.Ranks {
			for _, st := range rk.Steps {
				if st.Samples > 0 && st.Tokens > 0 && st.Tokens%st.Samples == 0 {
					return st.Tokens / st.Samples
				}
			}
		}
	}
	return 0
}

// tokensPerSample is a trial's tokens per sample (its sequence length), as
// its steps recorded it; for a summary that predates the field, the ratio of
// its tokens/s to its samples/s.
func tokensPerSample(t *Trial) float64 {
	if t.TokensPerSample > 0 {
		return float64(t.TokensPerSample)
	}
	return t.TokensPerS / t.Throughput.Center
}

// title is "Throughput (samples/s)".
func (m measure) title() string {
	return strings.ToUpper(m.name[:1]) + m.name[1:]
}

// axis is the value axis label: "samples/s (median)".
func (m measure) axis() string {
	if m.unit == "ms" {
		return "step time, ms (median)"
	}
	if strings.HasPrefix(m.unit, "%") {
		return "MFU (" + m.unit + ")"
	}
	return m.unit + " (median)"
}

// versus is a trial against the baseline as the charts and the table show
// it. Ratio is oriented so that > 1 is better (the baseline's step time over
// the trial's; the trial's throughput over the baseline's).
type versus struct {
	Ratio   float64 // ratio of the medians; 0 when either is missing
	Lo, Hi  float64 // the ratio's interval when the statistics give one, else 0
	Verdict string  // better | worse | same (no significant difference) | "" when not decided
}

// versusBaseline compares t with the baseline trial on m. The ratio of the
// medians is shown until the statistics (package stats) give each trial its
// interval and verdict against the baseline; those slot in here.
func versusBaseline(s *Summary, m measure, t *Trial) versus {
	base := baselineTrial(s)
	if base == nil || base == t {
		return versus{}
	}
	a, okA := m.of(t)
	b, okB := m.of(base)
	if !okA || !okB || a.center <= 0 || b.center <= 0 {
		return versus{}
	}
	if m.higher {
		return versus{Ratio: a.center / b.center}
	}
	return versus{Ratio: b.center / a.center}
}

// baselineTrial is the ok trial that changes nothing, nil when it did not finish.
func baselineTrial(s *Summary) *Trial {
	for i := range s.Trials {
		if t := &s.Trials[i]; t.Baseline && t.OK() {
			return t
		}
	}
	return nil
}
