package predict

import (
	"fmt"
	"slices"

	"github.com/casestudy/casestudy/engine"
)

// FromSteps is the Profile of a one-rank run's measured steps: the median of
// each time over the steps, bucket by bucket. Every step must carry the
// reducer's buckets with their ready times (a run of this engine with
// dist.backend set at world 1, docs/predict.md).
func FromSteps(steps []engine.StepMetrics, world int) (Profile, error) {
	if len(steps) == 0 {
		return Profile{}, fmt.Errorf("no measured steps")
	}
	nb := len(steps[0].Buckets)
	if nb == 0 {
		return Profile{}, fmt.Errorf("the steps have no gradient buckets: the run did not use the reducer " +
			"(a world of one needs dist.backend set; casestudy run --predict does it)")
	}
	med := func(f func(engine.StepMetrics) float64) float64 {
		v := make([]float64, len(steps))
		for i, s := range steps {
			v[i] = f(s)
		}
		return Median(v)
	}
	p := Profile{
		ForwardMS:   med(func(s engine.StepMetrics) float64 { return s.ForwardMS }),
		BackwardMS:  med(func(s engine.StepMetrics) float64 { return s.BackwardMS }),
		TailMS:      med(func(s engine.StepMetrics) float64 { return s.TailMS }),
		OptimizerMS: med(func(s engine.StepMetrics) float64 { return s.OptimizerMS }),
		World:       world,
	}
	for b := 0; b < nb; b++ {
		var ready, ms []float64
		var bytes int64
		op := ""
		for i, s := range steps {
			if len(s.Buckets) != nb {
				return Profile{}, fmt.Errorf("step %d has %d buckets, step %d has %d", s.Step, len(s.Buckets), steps[0].Step, nb)
			}
			bk := s.Buckets[b]
			if i == 0 {
				bytes, op = bk.Bytes, bk.Op
			}
			if bk.ReadyMS == nil {
				return Profile{}, fmt.Errorf("step %d bucket %d has no ready_ms: the run is from an engine before issue 40", s.Step, b)
			}
			ready = append(ready, *bk.ReadyMS)
			ms = append(ms, bk.MS)
		}
		if op == "" {
			op = AllReduce
		}
		r := Median(ready)
		if slices.Min(ready) < 0 {
			r = -1
		}
		p.Buckets = append(p.Buckets, Bucket{Op: op, Bytes: bytes, ReadyMS: r, MS: Median(ms)})
	}
	return p, nil
}

// Median is the middle value of v (the mean of the two middle ones for an
// even count; 0 for none).
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// mean is the arithmetic mean of v (0 for none).
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
