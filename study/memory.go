package study

import "strconv"

// ModelStates is the planner's estimate of one rank's model states: the
// fp32 weights, their gradients and the optimizer states, as the engine keeps
// them (engine/native/src/zero.h; docs/zero.md). Activations, the allocator's
// slack and communication buffers are not included: it is what ZeRO divides,
// not a prediction of the peak.
type ModelStates struct {
	Weights, Grads, OptimStates int64 // bytes on one rank
}

// Total is the three together.
func (m ModelStates) Total() int64 { return m.Weights + m.Grads + m.OptimStates }

// EstimateModelStates is one rank's model states for a model of params
// parameters in family (gpt and bert train with AdamW: two fp32 moments;
// resnet50 with SGD: one momentum buffer), cut into stages pipeline stages (an
// even share each: an estimate) and replicated over dp data-parallel ranks with
// ZeRO stage zero: 1 divides the optimizer states by dp, 2 the gradients too.
func EstimateModelStates(params int64, family string, stages, dp, zero int) ModelStates {
	stages, dp = max(stages, 1), max(dp, 1)
	p := (params + int64(stages) - 1) / int64(stages)
	perParam := int64(8) // AdamW: exp_avg, exp_avg_sq
	if family == "resnet50" {
		perParam = 4 // SGD momentum
	}
	share := func(bytes int64) int64 { return (bytes + int64(dp) - 1) / int64(dp) }
	m := ModelStates{Weights: 4 * p, Grads: 4 * p, OptimStates: perParam * p}
	if zero >= 1 {
		m.OptimStates = share(m.OptimStates)
	}
	if zero >= 2 {
		m.Grads = share(m.Grads)
	}
	return m
}

// ModelStatesFor is EstimateModelStates for a trial's knob values.
func (s *Study) ModelStatesFor(params int64, values map[string]string) ModelStates {
	stages, err := strconv.Atoi(values["pipeline.stages"])
	if err != nil || stages < 1 {
		stages = 1
	}
	zero, _ := strconv.Atoi(values["zero.stage"])
	return EstimateModelStates(params, s.Model.Family, stages, s.DataParallelFor(values), zero)
}
