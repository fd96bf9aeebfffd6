package stats

import (
	"github.com/casestudy/casestudy/store"
)

// Source says what one sample of a trial is.
type Source string

const (
	// FromRepeats: one sample per ok repeat (a separate launch), so
	// run-to-run variance is in the interval. Used when a trial has >= 2.
	FromRepeats Source = "repeats"
	// FromSteps: one sample per measured step of the trial's only ok repeat;
	// the interval then shows step-to-step variance only.
	FromSteps Source = "steps"
	// NoSamples: the trial has no ok repeat.
	NoSamples Source = "none"
)

// Samples are a trial's raw measurements as the statistics use them.
type Samples struct {
	Source     Source    `json:"source"`
	Throughput []float64 `json:"samples_per_s"` // samples/s, all ranks together
	StepMS     []float64 `json:"step_ms"`       // step time in ms, slowest rank
}

// TrialSamples picks a trial's samples: one per ok repeat when there are two
// or more, else one per measured step of its ok repeat.
//
// A repeat's throughput is the runner's RepeatRecord.SamplesPerS and its step
// time the median over steps of the slowest rank's step time. A step's
// throughput is the samples of all ranks in that step over the slowest
// rank's step time: the repeat definition applied to one step.
func TrialSamples(t *store.TrialRecord) Samples {
	var ok []*store.RepeatRecord
	for i := range t.Repeats {
		if t.Repeats[i].Outcome == store.OK {
			ok = append(ok, &t.Repeats[i])
		}
	}
	switch {
	case len(ok) >= 2:
		s := Samples{Source: FromRepeats}
		for _, r := range ok {
			steps := stepTimes(r)
			tp := r.SamplesPerS
			if tp == 0 { // older records: derive it from the steps
				tp = medianOf(stepThroughput(r))
			}
			s.Throughput = append(s.Throughput, tp)
			if len(steps) > 0 {
				s.StepMS = append(s.StepMS, medianOf(steps))
			}
		}
		return s
	case len(ok) == 1:
		return Samples{Source: FromSteps, Throughput: stepThroughput(ok[0]), StepMS: stepTimes(ok[0])}
	}
	return Samples{Source: NoSamples}
}

// stepTimes is, per measured step, the slowest rank's step time.
func stepTimes(r *store.RepeatRecord) []float64 {
	var out []float64
	for i := 0; ; i++ {
		var worst float64
		seen := false
		for _, rk := range r.Ranks {
			if i < len(rk.Steps) {
				seen = true
				worst = max(worst, rk.Steps[i].StepMS)
			}
		}
		if !seen {
			return out
		}
		out = append(out, worst)
	}
}

// stepThroughput is, per measured step, the samples of all ranks over the
// slowest rank's step time, in samples/s.
func stepThroughput(r *store.RepeatRecord) []float64 {
	var out []float64
	for i := 0; ; i++ {
		var worst float64
		samples := 0
		seen := false
		for _, rk := range r.Ranks {
			if i < len(rk.Steps) {
				seen = true
				worst = max(worst, rk.Steps[i].StepMS)
				samples += rk.Steps[i].Samples
			}
		}
		if !seen {
			return out
		}
		if worst > 0 {
			out = append(out, float64(samples)/(worst/1000))
		}
	}
}

func medianOf(v []float64) float64 { return DescribeOf(v).Median }
