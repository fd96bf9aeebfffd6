package measure

import (
	"math"

	mstats "github.com/aclements/go-moremath/stats"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// SummaryOptions tunes the per-trial summaries.
type SummaryOptions struct {
	NoisyCV float64      // 0: stats.DefaultNoisyCV
	Metric  stats.Metric // the objective of the summary's Value; zero: throughput
}

func stepMSOf(steps []engine.StepMetrics) []float64 {
	xs := make([]float64, 0, len(steps))
	for _, s := range steps {
		xs = append(xs, s.StepMS)
	}
	return xs
}

// SummarizeRepeat condenses one repeat: rank 0's measured step times (median,
// p10/p90, CV across steps) and the spread of per-rank median step times.
// It returns nil when no rank measured a step.
func SummarizeRepeat(rep *store.RepeatRecord) *store.RepeatSummary {
	if len(rep.Ranks) == 0 || len(rep.Ranks[0].Steps) == 0 {
		return nil
	}
	d := stats.DescribeOf(stepMSOf(rep.Ranks[0].Steps))
	sum := &store.RepeatSummary{StepMSMedian: d.Median, StepMSP10: d.P10, StepMSP90: d.P90, StepCV: d.CV}
	var medians []float64
	for _, r := range rep.Ranks {
		if len(r.Steps) > 0 {
			medians = append(medians, stats.DescribeOf(stepMSOf(r.Steps)).Median)
		}
	}
	if len(medians) > 1 {
		lo, hi := mstats.Sample{Xs: medians}.Bounds()
		if m := stats.DescribeOf(medians).Median; m > 0 {
			sum.RankSpread = (hi - lo) / m
		}
	}
	return sum
}

// SummarizeTrial condenses the clean launches of a trial (ok, not tainted):
// the objective's Value, samples/s and tokens/s are geometric means over
// launches (each launch's total samples over the slowest rank's measured
// time), the report's estimator; step-time statistics pool rank 0's steps of
// every clean launch; RepeatCV is the CV of samples/s across launches. The
// trial is noisy when either CV exceeds the threshold. Phase times, TFLOP/s,
// MFU and memory come from rank 0's steps (medians; peak memory is the
// maximum over ranks). It returns nil when no clean launch measured a step.
func SummarizeTrial(reps []store.RepeatRecord, opt SummaryOptions) *store.TrialSummary {
	th := opt.NoisyCV
	if th <= 0 {
		th = stats.DefaultNoisyCV
	}
	var sps, tps []float64
	var steps []engine.StepMetrics
	var memPeak, optState int64
	skipped := 0
	finalLoss := math.NaN()
	for i := range reps {
		r := &reps[i]
		if r.Outcome != store.OK || r.Tainted != "" || len(r.Ranks) == 0 || len(r.Ranks[0].Steps) == 0 {
			continue
		}
		sps = append(sps, r.SamplesPerS)
		tps = append(tps, r.TokensPerS)
		steps = append(steps, r.Ranks[0].Steps...)
		finalLoss = r.Ranks[0].Steps[len(r.Ranks[0].Steps)-1].Loss
		for _, rk := range r.Ranks {
			for _, s := range rk.Steps {
				memPeak = max(memPeak, s.MemPeakBytes)
				optState = max(optState, s.OptimStateBytes)
				if s.Skipped && rk.Rank == r.Ranks[0].Rank {
					skipped++
				}
			}
		}
	}
	if len(steps) == 0 {
		return nil
	}
	field := func(get func(engine.StepMetrics) float64) float64 {
		xs := make([]float64, len(steps))
		for i, s := range steps {
			xs[i] = get(s)
		}
		return stats.DescribeOf(xs).Median
	}
	st := stats.DescribeOf(stepMSOf(steps))
	rep := stats.DescribeOf(sps)
	m := opt.Metric
	if m.Name == "" {
		m = stats.Metrics["throughput"]
	}
	rec := &store.TrialRecord{Outcome: store.OK, Repeats: reps}
	sum := &store.TrialSummary{
		Metric:        m.Name,
		Unit:          m.Unit,
		Value:         geoMean(TrialLaunches(rec, m).Values),
		Launches:      len(sps),
		SamplesPerS:   geoMean(sps),
		TokensPerS:    geoMean(tps),
		StepMSMedian:  st.Median,
		StepMSP10:     st.P10,
		StepMSP90:     st.P90,
		StepCV:        st.CV,
		RepeatCV:      rep.CV,
		TFLOPS:        launchesRate(reps, func(s engine.StepMetrics) float64 { return s.TFLOPS }),
		MFU:           launchesRate(reps, func(s engine.StepMetrics) float64 { return s.MFU }),
		MemPeakBytes:  memPeak,
		FinalLoss:     finalLoss,
		SkippedSteps:  skipped,
		ForwardMS:     field(func(s engine.StepMetrics) float64 { return s.ForwardMS }),
		BackwardMS:    field(func(s engine.StepMetrics) float64 { return s.BackwardMS }),
		OptimizerMS:   field(func(s engine.StepMetrics) float64 { return s.OptimizerMS }),
		ExposedCommMS: field(func(s engine.StepMetrics) float64 { return s.ExposedCommMS }),
		CommMS:        field(func(s engine.StepMetrics) float64 { return s.CommMS }),
		BubbleMS:      field(func(s engine.StepMetrics) float64 { return s.BubbleMS }),
		TPCommMS:      field(func(s engine.StepMetrics) float64 { return s.TPCommMS }),
		GatherWaitMS:  field(func(s engine.StepMetrics) float64 { return s.GatherWaitMS }),
	}
	sum.Noisy = sum.StepCV > th || sum.RepeatCV > th
	sum.OptimStateBytes = optState
	return sum
}

// Throughput is a repeat's throughput: total samples and tokens of every rank's
// measured steps over the measured wall time of the slowest rank (the sum of
// its step times), not a mean of per-step rates. Independent replicas
// (procs_per_gpu > 1) add up the same way.
func Throughput(ranks []store.RankRecord) (samplesPerS, tokensPerS float64) {
	var samples, tokens int64
	var slowestMS float64
	for _, r := range ranks {
		var ms float64
		for _, s := range r.Steps {
			samples += int64(s.Samples)
			tokens += int64(s.Tokens)
			ms += s.StepMS
		}
		slowestMS = max(slowestMS, ms)
	}
	if slowestMS <= 0 {
		return 0, 0
	}
	sec := slowestMS / 1000
	return float64(samples) / sec, float64(tokens) / sec
}

// geoMean is the geometric mean of positive values (stats.Value.Center), 0 for none.
func geoMean(xs []float64) float64 {
	var ok []float64
	for _, x := range xs {
		if x > 0 {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return 0
	}
	return stats.ValueOf(ok, 0.95).Center
}
