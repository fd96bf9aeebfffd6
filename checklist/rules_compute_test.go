package checklist

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
)

func TestPrecision(t *testing.T) {
	fp32 := spec{id: "a1b2", thr: 100, stepMS: 80, loss: 5.00}
	runCases(t, "precision", []ruleCase{
		{name: "bf16 faster with matching loss", status: Finding,
			run:      mkRun([]spec{fp32, {id: "c3d4", set: set("precision", "bf16"), thr: 190, stepMS: 42, loss: 5.015}}),
			contains: []string{"bf16 autocast was 1.90× faster than fp32", "c3d4", "a1b2", "within 0.30%", "use precision: bf16"},
			trials:   []string{"a1b2", "c3d4"}},
		{name: "bf16 faster but loss differs", status: Pass,
			run:      mkRun([]spec{fp32, {id: "c3d4", set: set("precision", "bf16"), thr: 190, stepMS: 42, loss: 6.0}}),
			contains: []string{"final loss differs by 20.0%"}},
		{name: "not faster enough", status: Pass,
			run:      mkRun([]spec{fp32, {id: "c3d4", set: set("precision", "bf16"), thr: 104, stepMS: 77, loss: 5.0}}),
			contains: []string{"1.04×", "below 1.10×"}},
		{name: "faster but not decided over 3 launches", status: Pass,
			run:      mkRun([]spec{{id: "a1b2", thr: 100, stepMS: 80, loss: 5, noise: 0.15}, {id: "c3d4", set: set("precision", "bf16"), thr: 125, stepMS: 64, loss: 5, noise: 0.1}}),
			contains: []string{"1.26×", "not decided faster", "undecided (needs ~"}},
		{name: "study lowers min_speedup", status: Finding,
			run: mkRun([]spec{fp32, {id: "c3d4", set: set("precision", "bf16"), thr: 104, stepMS: 77, loss: 5.0}}),
			cfg: Config{Thresholds: map[string]map[string]float64{"precision": {"min_speedup": 1.03}}}},
		{name: "baseline already bf16", status: NotApplicable,
			run: mkRun([]spec{{id: "a", set: set("precision", "bf16"), thr: 190, stepMS: 42, loss: 5},
				{id: "b", set: set("precision", "fp32"), thr: 100, stepMS: 80, loss: 5}}, withBaseline("precision", "bf16")),
			contains: []string{"lower precision than the baseline's bf16"}},
		{name: "no precision pair", status: NotApplicable,
			run:      mkRun([]spec{fp32, {id: "x", set: set("precision", "bf16", "graphs", "true"), thr: 190, stepMS: 42, loss: 5}}),
			contains: []string{"differ only in precision"}},
		{name: "loss not recorded", status: NotApplicable,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 80}, {id: "b", set: set("precision", "bf16"), thr: 190, stepMS: 42}}),
			contains: []string{"final loss was not recorded"}},
	})
}

func TestFP16Overflow(t *testing.T) {
	skipEvery := func(n int) func(int, int, *engine.StepMetrics) {
		return func(_, i int, s *engine.StepMetrics) {
			s.LossScale = 1024
			s.Skipped = i%n == 0
		}
	}
	runCases(t, "fp16-overflow", []ruleCase{
		{name: "many skipped steps", status: Finding,
			run:      mkRun([]spec{{id: "f16", set: set("precision", "fp16"), thr: 100, stepMS: 40, loss: 5, step: skipEvery(5)}}),
			contains: []string{"skipped 12 of 60 measured steps (20.0%)", "use precision: bf16"}, trials: []string{"f16"}},
		{name: "loss scale collapsed", status: Finding,
			run: mkRun([]spec{{id: "f16", set: set("precision", "fp16"), thr: 100, stepMS: 40, loss: 5,
				step: func(_, i int, s *engine.StepMetrics) { s.LossScale = 0.5 }}}),
			contains: []string{"loss scale fell to 0.5"}},
		{name: "rare skips pass", status: Pass,
			run: mkRun([]spec{{id: "f16", set: set("precision", "fp16"), thr: 100, stepMS: 40, loss: 5,
				step: func(_, i int, s *engine.StepMetrics) { s.LossScale = 65536 }}}),
			contains: []string{"skipped at most 0.00%"}},
		{name: "threshold raised by the study", status: Pass,
			run: mkRun([]spec{{id: "f16", set: set("precision", "fp16"), thr: 100, stepMS: 40, loss: 5, step: skipEvery(5)}}),
			cfg: Config{Thresholds: map[string]map[string]float64{"fp16-overflow": {"max_skipped_frac": 0.25}}}},
		{name: "no fp16 trial", status: NotApplicable,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 80, loss: 5}}), contains: []string{"no completed fp16 trial"}},
	})
}

func TestCUDAGraphs(t *testing.T) {
	gpu := onGPUs(1, "NVIDIA H200", 141<<30, 0, "")
	runCases(t, "cuda-graphs", []ruleCase{
		{name: "graphs measured faster", status: Finding, severity: Warning,
			run:      mkRun([]spec{{id: "eager", thr: 100, stepMS: 10}, {id: "graph", set: set("graphs", "true"), thr: 125, stepMS: 8}}, gpu),
			contains: []string{"1.25× faster", "use graphs: true"}, trials: []string{"eager", "graph"}},
		{name: "graphs no faster", status: Pass,
			run:      mkRun([]spec{{id: "eager", thr: 100, stepMS: 10}, {id: "graph", set: set("graphs", "true"), thr: 101, stepMS: 9.9}}, gpu),
			contains: []string{"at most 1.01×"}},
		{name: "baseline graphs and faster", status: Pass,
			run: mkRun([]spec{{id: "eager", thr: 100, stepMS: 10}, {id: "graph", set: set("graphs", "true"), thr: 125, stepMS: 8}},
				gpu, withBaseline("graphs", "true")),
			contains: []string{"the baseline already uses CUDA Graphs, 1.25× faster than eager"}},
		{name: "baseline graphs but slower", status: Finding,
			run: mkRun([]spec{{id: "eager", thr: 100, stepMS: 10}, {id: "graph", set: set("graphs", "true"), thr: 80, stepMS: 12.5}},
				gpu, withBaseline("graphs", "true")),
			contains: []string{"use graphs: false"}},
		{name: "short steps at low MFU hint", status: Finding, severity: Info,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 8, mfu: 0.12}}, gpu),
			contains: []string{"8 ms at 12.0% MFU", "sweep graphs"}},
		// ResNet-50 on the H200 (results/reference/resnet50-h200-kernel-mix):
		// a 39.3 ms step at 16% MFU, but the profile shows the GPU idle 2.3%
		// of it; profile-launch-bound passes, and so must this rule.
		{name: "short step at low MFU, but its profile shows a busy GPU", status: Pass,
			run: mkRun([]spec{{id: "a", thr: 6521, stepMS: 39.3, mfu: 0.162,
				prof: gpuProfile(39.3, 38.4, map[string]float64{profile.BatchNorm: 19, profile.Convolution: 19.4}, 0)}}, gpu),
			contains: []string{"its profile shows the GPU idle only 2.29% of the step (at most 20.0%): not launch-bound"},
			absent:   []string{"sweep graphs"}},
		{name: "a profile with the GPU idle: launch-bound", status: Finding, severity: Info,
			run: mkRun([]spec{{id: "a", thr: 640, stepMS: 50, mfu: 0.2,
				prof: gpuProfile(50, 26, map[string]float64{profile.GEMM: 20, profile.Elementwise: 6}, 0)}}, gpu),
			contains: []string{"GPU idle 48.0% of its 50 ms step (above 20.0%)", "sweep graphs: [false, true]"}},
		{name: "the profile is judged at profile-launch-bound's threshold", status: Pass,
			run: mkRun([]spec{{id: "a", thr: 640, stepMS: 50, mfu: 0.2,
				prof: gpuProfile(50, 26, map[string]float64{profile.GEMM: 20, profile.Elementwise: 6}, 0)}}, gpu),
			cfg:      Config{Thresholds: map[string]map[string]float64{"profile-launch-bound": {"max_idle_share": 0.5}}},
			contains: []string{"at most 50.0%"}},
		{name: "long steps at high MFU", status: Pass,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 300, mfu: 0.45}}, gpu)},
		{name: "cpu run without pair", status: NotApplicable,
			run: mkRun([]spec{{id: "a", thr: 100, stepMS: 8}}), contains: []string{"no MFU"}},
	})
}
