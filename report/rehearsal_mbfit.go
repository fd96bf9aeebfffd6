package report

import (
	"fmt"
	"math"

	"github.com/casestudy/casestudy/store"
)

// The largest micro-batch of a rehearsal trial: the plan's per-rank memory
// model (runner.RankEstimateModel, recorded with the trial as
// store.RehearsalTrial.EstimateModel: a static part, the model states,
// gradient buckets and buffers, and a part linear in the micro-batch, the
// activations) calibrated by the measured allocator peak at the trial's
// micro-batch: the static part is kept and the per-sample part scaled so that
// the model meets the peak. The answer is the largest micro-batch whose
// calibrated peak plus the process's memory (what the plan counted) stays
// within RehearsalFitHeadroom of one real GPU, the plan's own rule. It is an
// extrapolation from one measured point, labelled so; nothing is printed
// where the record has no model (records before 2026-12-07) or where the
// peak is below the model's static part (the model cannot be calibrated).

// rehearsalBudget is the most one rank's allocator peak may reach on one
// real GPU of capacity bytes: RehearsalFitHeadroom of it less the process's
// memory outside the allocator, the plan's rule (runner.CheckRehearsalFit).
// It is the one rule of a rehearsal trial's memory: whether its measured
// peak fits (RehearsalMemory.Fits) and its largest micro-batch, so that a
// trial fits exactly when its largest micro-batch is at least its own.
func rehearsalBudget(capacity, process int64) int64 {
	return int64(float64(capacity)*store.RehearsalFitHeadroom) - process
}

// rehearsalRule says rehearsalBudget in words.
func rehearsalRule(capacity, process int64) string {
	return fmt.Sprintf("%.0f%% of one GPU's %s less the process's %s, the plan's rule", 100*store.RehearsalFitHeadroom, rhGiB(capacity), rhGiB(process))
}

// rehearsalLargestMicroBatch fills m's largest micro-batch and its method
// from the measured peak (m.PeakBytes > 0, m.CapacityBytes > 0).
func rehearsalLargestMicroBatch(m *RehearsalMemory, info *store.RehearsalTrial, process int64) {
	model := info.EstimateModel
	if model == nil || model.PerSampleBytes <= 0 {
		m.Method = "unknown: this record has no plan-time memory model (its static and per-sample parts, recorded with each trial since 2026-12-07); rehearse again for it"
		return
	}
	mb := max(info.MicroBatch, 1)
	budget := rehearsalBudget(m.CapacityBytes, process)
	rule := rehearsalRule(m.CapacityBytes, process)
	m.StaticBytes, m.PlanPerSampleBytes = model.StaticBytes, model.PerSampleBytes
	m.PlanLargestMicroBatch = largestLinear(budget, model.StaticBytes, model.PerSampleBytes)
	if m.PeakBytes <= model.StaticBytes {
		m.Method = fmt.Sprintf("unknown: the measured peak %s is below the plan's static estimate %s (model states, gradient buckets, buffers), so it cannot calibrate the per-sample part; "+
			"the plan's model alone (static + %s a sample, not calibrated) gives %d within %s",
			rhGiB(m.PeakBytes), rhGiB(model.StaticBytes), rhMiB(int64(model.PerSampleBytes)), m.PlanLargestMicroBatch, rule)
		return
	}
	m.PerSampleBytes = float64(m.PeakBytes-model.StaticBytes) / float64(mb)
	n := largestCalibrated(budget, model.StaticBytes, m.PeakBytes, mb)
	how := fmt.Sprintf("the plan's per-rank model calibrated by the measured peak: its static %s kept, its per-sample %s scaled x%.2f to %s so that it meets the peak at micro-batch %d; within %s; the plan's model alone: %d",
		rhGiB(model.StaticBytes), rhMiB(int64(model.PerSampleBytes)), m.PerSampleBytes/model.PerSampleBytes, rhMiB(int64(m.PerSampleBytes)), mb, rule, m.PlanLargestMicroBatch)
	if n < 1 {
		m.Method = "none fits: " + how
		return
	}
	m.LargestMicroBatch, m.Method = n, how
}

// largestLinear is the largest whole n with static + perSample x n <= budget
// (0 when none).
func largestLinear(budget, static int64, perSample float64) int {
	if perSample <= 0 || budget <= static {
		return 0
	}
	return int(math.Floor(float64(budget-static) / perSample))
}

// largestCalibrated is largestLinear of the line through static at 0 and
// peak at mb (peak > static), in whole bytes: at least mb exactly when peak
// is within budget (a float per-sample part could round it to mb - 1).
func largestCalibrated(budget, static, peak int64, mb int) int {
	if budget <= static {
		return 0
	}
	return int((budget - static) * int64(mb) / (peak - static))
}
