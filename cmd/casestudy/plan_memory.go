package main

import (
	"fmt"
	"io"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/study"
)

// writeModelStates prints the planner's per-rank memory estimate of the model
// states (weights, gradients, optimizer states; study.EstimateModelStates) for
// each trial, when the plan sweeps or sets zero.stage or tp.degree: what ZeRO
// and tensor parallelism divide (the latter a tensor rank's share). The
// parameter count comes from the engine library (cs_describe); without one the
// line says so and the plan is otherwise unchanged.
func writeModelStates(w io.Writer, s *study.Study, plan *study.Plan, libFlag string) {
	zero, tp := false, false
	for _, t := range plan.Trials {
		zero = zero || (t.Knobs["zero.stage"] != "" && t.Knobs["zero.stage"] != "0")
		tp = tp || (t.Knobs["tp.degree"] != "" && t.Knobs["tp.degree"] != "1")
	}
	if !zero && !tp {
		return
	}
	params, err := describeParams(s, libFlag)
	if err != nil {
		fmt.Fprintf(w, "model states per rank: no estimate (%v)\n", err)
		return
	}
	fmt.Fprintf(w, "model states per rank (estimate: %s %s, %d parameters; fp32 weights + gradients + optimizer states, activations not included):\n",
		s.Model.Family, s.Model.Preset, params)
	const gib = 1 << 30
	for _, t := range plan.Trials {
		m := s.ModelStatesFor(params, t.Knobs)
		layout := "zero.stage=" + t.Knobs["zero.stage"]
		if tp {
			layout = fmt.Sprintf("tp.degree=%s dp=%d %s", t.Knobs["tp.degree"], s.DataParallelFor(t.Knobs), layout)
		}
		fmt.Fprintf(w, "  %s  %s  %.2f GiB (weights %.2f, gradients %.2f, optimizer states %.2f)\n",
			t.ID, layout, float64(m.Total())/gib, float64(m.Weights)/gib, float64(m.Grads)/gib, float64(m.OptimStates)/gib)
	}
}

// describeParams is the study model's parameter count from the engine library.
func describeParams(s *study.Study, libFlag string) (int64, error) {
	path, err := engine.Discover(libFlag)
	if err != nil {
		return 0, err
	}
	lib, err := binding.Load(path)
	if err != nil {
		return 0, err
	}
	defer lib.Close()
	d, err := lib.Describe(engine.Config{Family: s.Model.Family, Preset: s.Model.Preset, MicroBatch: 1,
		Device: "cpu", Precision: "fp32", GradAccum: 1, Dist: engine.DistConfig{WorldSize: 1}})
	if err != nil {
		return 0, err
	}
	return d.Params, nil
}
