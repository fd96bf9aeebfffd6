// Package synth generates launches of a training configuration, calibrated
// on the measured facts of a real run (docs/reports.md: one H200, GPT-2
// 124M, 50 measured steps a launch): a launch-to-launch effect 1.6-6.2x
// what 50 independent steps would give, autocorrelated steps (lag-1
// 0.08-0.88), host slow regimes (25 <-> 30 ms steps), a monotone drift of
// 0.2-0.9% over a launch. A launch's value is what the runner records: the
// samples of its measured steps over their wall time. The statistics' tests
// (false-positive rate, coverage, power of the sequential design, the
// compare gate) run on it with fixed seeds.
package synth

import (
	"math"
	"math/rand/v2"
)

// Model is one configuration's behaviour.
type Model struct {
	Tput     float64 // samples/s of a launch at its median level, before regimes and drift
	LaunchSD float64 // sd of a launch's ln level (the launch-to-launch effect)
	StepSD   float64 // sd of a step's ln time around its launch's level
	Phi      float64 // lag-1 autocorrelation of steps (AR(1))
	SlowIn   float64 // per-step probability of entering a host slow regime
	SlowStay float64 // per-step probability of staying in it
	SlowBy   float64 // step time factor in the slow regime
	Drift    float64 // relative change of step time from the first to the last step
}

// Calibrated scenarios: the sd of a launch's ln throughput is 1.1%, 2.3%
// and 4.3%, 3.8, 4.1 and 6.1 times the sd of the mean of 50 independent
// steps (measured: 1.6-6.2); Host has the slow regimes.
var (
	Quiet   = Model{Tput: 100, LaunchSD: 0.01, StepSD: 0.02, Phi: 0.3, Drift: 0.002}
	Typical = Model{Tput: 100, LaunchSD: 0.02, StepSD: 0.04, Phi: 0.6, Drift: 0.005}
	Host    = Model{Tput: 100, LaunchSD: 0.02, StepSD: 0.05, Phi: 0.88, SlowIn: 0.02, SlowStay: 0.9, SlowBy: 1.18, Drift: 0.009}
)

// H100 is calibrated on the five runs of one H100 (2026-12-06,
// ../shared/brief/verdicts-review.md §2.3): a launch-to-launch sd of ln
// throughput of about 0.3% (GPT-2's median 0.26%, range 0.07-0.38%), a
// power-limited drift of 1% over the window.
var H100 = Model{Tput: 100, LaunchSD: 0.0025, StepSD: 0.006, Phi: 0.7, Drift: 0.01}

// Steps is the number of measured steps of a launch.
const Steps = 50

// Scaled is the model with its throughput multiplied by f.
func (m Model) Scaled(f float64) Model { m.Tput *= f; return m }

// Launch draws one launch's throughput.
func (m Model) Launch(r *rand.Rand) float64 {
	level := -math.Log(m.Tput) + m.LaunchSD*r.NormFloat64()
	innov := m.StepSD * math.Sqrt(1-m.Phi*m.Phi)
	e := m.StepSD * r.NormFloat64()
	slow := false
	var total float64
	for i := range Steps {
		if i > 0 {
			e = m.Phi*e + innov*r.NormFloat64()
		}
		if slow {
			slow = r.Float64() < m.SlowStay
		} else {
			slow = r.Float64() < m.SlowIn
		}
		st := math.Exp(level + e)
		if slow {
			st *= m.SlowBy
		}
		total += st * (1 + m.Drift*float64(i)/(Steps-1))
	}
	return Steps / total
}

// Launches draws n launches.
func (m Model) Launches(r *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = m.Launch(r)
	}
	return out
}

// MeanLog is E[ln launch value] by Monte Carlo with a fixed seed: the true
// log throughput that the statistics estimate.
func (m Model) MeanLog() float64 {
	r := rand.New(rand.NewPCG(99, 99))
	const n = 20000
	var s float64
	for range n {
		s += math.Log(m.Launch(r))
	}
	return s / n
}

// Matched returns b rescaled so that its true mean log throughput is a's
// times f: the true ratio b/a is exactly f whatever the two noise models.
func Matched(a, b Model, f float64) Model {
	return b.Scaled(f * math.Exp(a.MeanLog()-b.MeanLog()))
}
