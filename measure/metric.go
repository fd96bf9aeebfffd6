package measure

import (
	"math"
	"strings"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// MetricFor maps a run's objective to its metric; an unknown or empty name is
// throughput, with a warning for an unknown one.
func MetricFor(o store.Objective) (m stats.Metric, warning string) {
	name := strings.ToLower(strings.TrimSpace(o.Metric))
	if name == "" {
		return stats.Metrics["throughput"], ""
	}
	if m, ok := stats.Metrics[name]; ok {
		return m, ""
	}
	return stats.Metrics["throughput"], "objective metric " + o.Metric + " is not one casestudy measures; ranked by throughput (samples/s)"
}

// LaunchValue is one launch's value of the metric m, computed over its measured
// window; ok is false when the launch did not finish or measured nothing
// usable (for example MFU without a known peak).
//
//   - throughput, tokens_per_s: total samples (tokens) of every rank over the
//     slowest rank's measured wall time (RepeatRecord.SamplesPerS/TokensPerS);
//   - step_time: the slowest rank's measured wall time over its steps (mean
//     step time, the reciprocal of throughput when samples per step are fixed);
//   - tflops: rank 0's per-step values weighted by step time (FLOPs done over
//     time taken);
//   - mfu: that TFLOP/s over the GPU's dense bf16 tensor-core peak
//     (engine.DenseBF16PeakTFLOPS), one peak whatever the trial's precision,
//     as the report's MFU: the engine's own mfu is against the peak at the
//     trial's precision, so an fp32 trial six times slower than a bf16 one
//     would rank higher. No value on devices the peak table does not list;
//   - memory: what the launch holds on the device, the caching allocator's
//     reserved peak over ranks and steps (a captured CUDA graph's private
//     pool included; peak allocated leaves it out). No value when no rank
//     recorded reserved bytes (CPU runs, older engines).
func LaunchValue(m stats.Metric, r *store.RepeatRecord) (float64, bool) {
	if r.Outcome != store.OK {
		return 0, false
	}
	var v float64
	switch m.Name {
	case "tokens_per_s":
		v = r.TokensPerS
		if v == 0 {
			_, v = Throughput(r.Ranks)
		}
	case "step_time":
		v = meanStepMS(r.Ranks)
	case "mfu":
		if peak := engine.DenseBF16PeakTFLOPS(deviceName(r.Ranks)); peak > 0 {
			v = launchRate(r, func(s engine.StepMetrics) float64 { return s.TFLOPS }) / peak
		}
	case "tflops":
		v = launchRate(r, func(s engine.StepMetrics) float64 { return s.TFLOPS })
	case "memory":
		v = memoryHeld(r.Ranks)
	default:
		v = r.SamplesPerS
		if v == 0 {
			v, _ = Throughput(r.Ranks)
		}
	}
	return v, v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v)
}

// deviceName is the GPU the launch ran on, as the engine described it ("" on
// CPUs and when no rank reported it).
func deviceName(ranks []store.RankRecord) string {
	for _, rk := range ranks {
		if rk.Info != nil && rk.Info.Device != "cpu" && rk.Info.DeviceName != "" {
			return rk.Info.DeviceName
		}
	}
	return ""
}

// meanStepMS is the slowest rank's measured wall time over its step count.
func meanStepMS(ranks []store.RankRecord) float64 {
	var worst float64
	for _, rk := range ranks {
		if len(rk.Steps) == 0 {
			continue
		}
		var ms float64
		for _, s := range rk.Steps {
			ms += s.StepMS
		}
		worst = math.Max(worst, ms/float64(len(rk.Steps)))
	}
	return worst
}

// timeWeighted is rank 0's per-step value weighted by step time.
func timeWeighted(ranks []store.RankRecord, get func(engine.StepMetrics) float64) float64 {
	if len(ranks) == 0 {
		return 0
	}
	r0 := ranks[0]
	for _, rk := range ranks {
		if rk.Rank == 0 {
			r0 = rk
		}
	}
	var num, den float64
	for _, s := range r0.Steps {
		num += get(s) * s.StepMS
		den += s.StepMS
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// launchRate is a per-step rate (TFLOP/s, the engine's MFU) on the launch's
// throughput basis: rank 0's work (the rate times each step's time) over the
// time its samples/s divide by (the measured window's wall clock, or the
// slowest rank's summed step times in older runs), so that TFLOP/s and MFU
// move with the objective instead of being medians of steps (which left out
// the gaps between the engine's calls and the power limiter's slow steps).
// Without a recorded samples/s it is the step-time-weighted mean.
func launchRate(r *store.RepeatRecord, get func(engine.StepMetrics) float64) float64 {
	var samples int64
	for _, rk := range r.Ranks {
		for _, s := range rk.Steps {
			samples += int64(s.Samples)
		}
	}
	if r.SamplesPerS <= 0 || samples == 0 || len(r.Ranks) == 0 {
		return timeWeighted(r.Ranks, get)
	}
	window := float64(samples) / r.SamplesPerS // seconds
	r0 := r.Ranks[0]
	for _, rk := range r.Ranks {
		if rk.Rank == 0 {
			r0 = rk
		}
	}
	var work float64 // rate × seconds
	for _, s := range r0.Steps {
		work += get(s) * s.StepMS / 1000
	}
	return work / window
}

// launchesRate is launchRate's geometric mean over a trial's clean launches.
func launchesRate(reps []store.RepeatRecord, get func(engine.StepMetrics) float64) float64 {
	var xs []float64
	for i := range reps {
		r := &reps[i]
		if r.Outcome != store.OK || r.Tainted != "" || len(r.Ranks) == 0 || len(r.Ranks[0].Steps) == 0 {
			continue
		}
		xs = append(xs, launchRate(r, get))
	}
	return geoMean(xs)
}

// memoryHeld is the largest reserved peak over ranks and steps, 0 when none
// was recorded.
func memoryHeld(ranks []store.RankRecord) float64 {
	var v float64
	for _, rk := range ranks {
		for _, s := range rk.Steps {
			v = math.Max(v, float64(s.MemReservedBytes))
		}
	}
	return v
}
