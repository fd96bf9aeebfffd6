package checklist

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// stageSteps gives each rank (= stage) a stage record with the bubble fraction
// bubbles[rank] and the theory bubble.
func stageSteps(theory float64, bubbles ...float64) func(int, int, *engine.StepMetrics) {
	return func(rank, _ int, s *engine.StepMetrics) {
		s.Stages = []engine.StageMetrics{{Stage: rank, BubbleFraction: bubbles[rank], TheoryBubble: theory,
			BusyMS: 100 * (1 - bubbles[rank]), ActPeakBytes: 2 << 30}}
	}
}

func TestPipelineBubble(t *testing.T) {
	pp := func(id string, m string, thr float64, step func(int, int, *engine.StepMetrics)) spec {
		return spec{id: id, set: set("pipeline.stages", "4", "pipeline.microbatches", m), ranks: 4, thr: thr, stepMS: 100, step: step}
	}
	runCases(t, "pipeline-bubble", []ruleCase{
		{name: "too few micro-batches", status: Finding,
			run:      mkRun([]spec{pp("m4", "4", 100, stageSteps(3.0/7, 0.43, 0.43, 0.43, 0.43))}),
			contains: []string{"4 micro-batches for 4 stages", "42.9%", "pipeline.microbatches: 16"}, trials: []string{"m4"}},
		{name: "bubble above theory", status: Finding,
			run:      mkRun([]spec{pp("m16", "16", 100, stageSteps(3.0/19, 0.16, 0.16, 0.35, 0.16))}),
			contains: []string{"stage 2 idles 35.0% of the step against a theory of 15.8%", "pipeline.balance"}},
		{name: "threshold raised", status: Pass,
			run: mkRun([]spec{pp("m16", "16", 100, stageSteps(3.0/19, 0.16, 0.16, 0.35, 0.16))}),
			cfg: Config{Thresholds: map[string]map[string]float64{"pipeline-bubble": {"max_excess": 0.25}}}},
		{name: "best trial is healthy", status: Pass,
			run: mkRun([]spec{pp("m4", "4", 60, stageSteps(3.0/7, 0.43, 0.43, 0.43, 0.43)),
				pp("m16", "16", 100, stageSteps(3.0/19, 0.17, 0.16, 0.18, 0.16))}),
			contains: []string{"m16", "16 micro-batches for 4 stages"}},
		{name: "no pipeline", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 1, stepMS: 1}})},
	})
}

func TestPipelineScheduleMemory(t *testing.T) {
	gp := func(id, sched string, mem int64) spec {
		return spec{id: id, set: set("pipeline.stages", "2", "pipeline.microbatches", "8", "pipeline.schedule", sched),
			ranks: 2, thr: 100, stepMS: 100, mem: mem}
	}
	gpu := onGPUs(2, "NVIDIA H200", 140<<30, 18, "")
	oomSpec := spec{id: "g-oom", set: set("pipeline.stages", "2", "pipeline.microbatches", "8", "pipeline.schedule", "gpipe"), outcome: store.OOM}
	runCases(t, "pipeline-schedule-memory", []ruleCase{
		{name: "GPipe near the limit, 1F1B much lower", status: Finding,
			run:      mkRun([]spec{gp("g", "gpipe", 130<<30), gp("f", "1f1b", 40<<30)}, gpu),
			contains: []string{"peaked at 130.0 GiB, 92.9% of 140.0 GiB", "1F1B (f) peaked at 40.0 GiB", "use pipeline.schedule: 1f1b"},
			trials:   []string{"g", "f"}},
		{name: "GPipe out of memory", status: Finding,
			run:      mkRun([]spec{oomSpec, {id: "f", set: set("pipeline.stages", "2", "pipeline.microbatches", "8"), ranks: 2, thr: 100, stepMS: 100}}),
			contains: []string{"ran out of memory", "with 1f1b (f) it ended ok"}},
		{name: "GPipe with room", status: Pass, run: mkRun([]spec{gp("g", "gpipe", 60<<30)}, gpu)},
		{name: "near_limit lowered", status: Finding, run: mkRun([]spec{gp("g", "gpipe", 60<<30)}, gpu),
			cfg: Config{Thresholds: map[string]map[string]float64{"pipeline-schedule-memory": {"near_limit": 0.4}}}},
		{name: "CPU run", status: NotApplicable, run: mkRun([]spec{gp("g", "gpipe", 60<<30)})},
		{name: "1F1B only", status: NotApplicable, run: mkRun([]spec{gp("f", "1f1b", 130<<30)}, gpu)},
	})
}
