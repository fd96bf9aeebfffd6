package checklist

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
)

func TestMPS(t *testing.T) {
	gpu := onGPUs(1, "NVIDIA H200", 141<<30, 0, "")
	two := set("procs_per_gpu", "2")
	twoMPS := set("procs_per_gpu", "2", "mps", "true")
	runCases(t, "mps", []ruleCase{
		{name: "MPS measured faster", status: Finding, severity: Warning,
			run:      mkRun([]spec{{id: "ts", set: two, ranks: 2, thr: 100, stepMS: 20}, {id: "mps", set: twoMPS, ranks: 2, thr: 140, stepMS: 14}}, gpu),
			contains: []string{"MPS made the trial 1.40× faster with 2 process(es) per GPU", "use mps: true with procs_per_gpu: 2"},
			trials:   []string{"ts", "mps"}},
		{name: "MPS no faster", status: Pass,
			run: mkRun([]spec{{id: "ts", set: two, ranks: 2, thr: 100, stepMS: 20}, {id: "mps", set: twoMPS, ranks: 2, thr: 101, stepMS: 20}}, gpu)},
		{name: "time-sliced processes", status: Finding,
			run:      mkRun([]spec{{id: "ts", set: two, ranks: 2, thr: 100, stepMS: 20, mfu: 0.3}}, gpu),
			contains: []string{"without MPS", "time-sliced"}},
		{name: "small per-GPU work", status: Finding, severity: Info,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 4, mfu: 0.08}}, gpu),
			contains: []string{"8.00% MFU", "procs_per_gpu: [1, 2]"}},
		// ResNet-50 at micro-batch 256 on an H100: 16% MFU over long steps is
		// the model's arithmetic intensity, not work too small for the GPU
		{name: "low MFU over long steps: not small work", status: Pass,
			run:      mkRun([]spec{{id: "a", set: set("micro_batch", "256"), thr: 3000, stepMS: 85, mfu: 0.16}}, gpu),
			contains: []string{"steps take 85 ms: the work per step is not small"}},
		// The H100 ResNet-50 run printed "39.14059257507324 ms": rounded now.
		{name: "a measured step is printed rounded", status: Pass,
			run:      mkRun([]spec{{id: "a", set: set("micro_batch", "256"), thr: 6541, stepMS: 39.14059257507324, mfu: 0.162}}, gpu),
			contains: []string{"steps take 39.1 ms: the work"}, absent: []string{"39.14"}},
		{name: "GPU well used", status: Pass, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 20, mfu: 0.5}}, gpu)},
		{name: "CPU run", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 20}})},
	})
}

func TestMemoryHeadroom(t *testing.T) {
	gpu := onGPUs(2, "NVIDIA H100 80GB HBM3", 80<<30, 18, "")
	runCases(t, "memory-headroom", []ruleCase{
		{name: "best trial at 95%", status: Finding,
			run: mkRun([]spec{{id: "big", set: set("micro_batch", "32"), thr: 200, stepMS: 100, mem: 76 << 30},
				{id: "small", thr: 100, stepMS: 60, mem: 30 << 30}}, gpu),
			contains: []string{"the best trial big holds 76.0 GiB (reserved by the caching allocator", "95.0%", "activation_checkpointing: true"}, trials: []string{"big"}},
		// the H100 gpt run: every graphed trial's peak allocated was 2.0 GiB
		// while it reserved up to 29.3 GiB; the check is on what it holds
		{name: "CUDA graphs: judged on the reserved pool, not the peak allocated", status: Finding,
			run: mkRun([]spec{{id: "graphed", set: set("graphs", "true"), thr: 200, stepMS: 100, mem: 2 << 30, held: 76 << 30},
				{id: "small", thr: 100, stepMS: 60, mem: 30 << 30}}, gpu),
			contains: []string{"graphed holds 76.0 GiB"}, trials: []string{"graphed"}},
		{name: "CUDA graphs without reserved bytes: not judged", status: NotApplicable,
			run:      mkRun([]spec{{id: "graphed", set: set("graphs", "true"), thr: 200, stepMS: 100, mem: 2 << 30}}, gpu),
			contains: []string{"leaves out the graph's pool"}},
		{name: "best trial fine, another near", status: Pass,
			run: mkRun([]spec{{id: "big", set: set("micro_batch", "32"), thr: 100, stepMS: 300, mem: 76 << 30},
				{id: "small", thr: 150, stepMS: 60, mem: 30 << 30}}, gpu),
			contains: []string{"1 other trial(s) above 90.0%"}},
		{name: "override max_frac", status: Finding,
			run: mkRun([]spec{{id: "small", thr: 150, stepMS: 60, mem: 60 << 30}}, gpu),
			cfg: Config{Thresholds: map[string]map[string]float64{"memory-headroom": {"max_frac": 0.7}}}},
		{name: "no peak recorded", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 1, stepMS: 1}}, gpu)},
		{name: "CPU run", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 1, stepMS: 1, mem: 1 << 30}})},
	})
}

func TestStraggler(t *testing.T) {
	slowRank := func(rank int, factor float64) func(int, int, *engine.StepMetrics) {
		return func(r, _ int, s *engine.StepMetrics) {
			if r == rank {
				s.ForwardMS *= factor
				s.BackwardMS *= factor
				s.OptimizerMS *= factor
			}
		}
	}
	runCases(t, "straggler", []ruleCase{
		{name: "rank 3 slow", status: Finding,
			run:      mkRun([]spec{{id: "a", ranks: 4, thr: 100, stepMS: 100, step: slowRank(3, 1.25)}}),
			contains: []string{"rank 3 (GPU 3) computed", "spread 25.0%", "slowest in 3 of 3 repeat(s)"}, trials: []string{"a"}},
		{name: "balanced ranks", status: Pass,
			run: mkRun([]spec{{id: "a", ranks: 4, thr: 100, stepMS: 100, step: slowRank(3, 1.02)}})},
		{name: "spread allowed by the study", status: Pass,
			run: mkRun([]spec{{id: "a", ranks: 4, thr: 100, stepMS: 100, step: slowRank(3, 1.25)}}),
			cfg: Config{Thresholds: map[string]map[string]float64{"straggler": {"max_spread": 0.3}}}},
		{name: "pipeline trials excluded", status: NotApplicable,
			run: mkRun([]spec{{id: "a", set: set("pipeline.stages", "4"), ranks: 4, thr: 100, stepMS: 100, step: slowRank(3, 1.5)}})},
		{name: "single rank", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 100}})},
	})
}
