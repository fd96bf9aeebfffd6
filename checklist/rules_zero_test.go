package checklist

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func TestZeroMemoryNotTime(t *testing.T) {
	gpu := onGPUs(8, "NVIDIA H100 80GB HBM3", 80<<30, 18, "")
	ddp := func(id string, mem int64, thr float64) spec {
		return spec{id: id, set: set("zero.stage", "0"), ranks: 8, thr: thr, stepMS: 1000 / thr, mem: mem}
	}
	zero := func(id, stage string, mem int64, thr float64) spec {
		return spec{id: id, set: set("zero.stage", stage), ranks: 8, thr: thr, stepMS: 1000 / thr, mem: mem}
	}
	runCases(t, "zero-memory-not-time", []ruleCase{
		{name: "slower with room to spare", status: Finding,
			run:      mkRun([]spec{ddp("d", 30<<30, 100), zero("z1", "1", 24<<30, 90)}, gpu),
			contains: []string{"10.0% slower than its DDP twin d", "37.5% of 80.0 GiB", "spend the memory ZeRO frees"},
			trials:   []string{"z1", "d"}},
		{name: "as fast", status: Pass, run: mkRun([]spec{ddp("d", 30<<30, 100), zero("z1", "1", 24<<30, 99)}, gpu)},
		{name: "DDP near the limit", status: Pass, run: mkRun([]spec{ddp("d", 75<<30, 100), zero("z2", "2", 60<<30, 80)}, gpu),
			contains: []string{"peaked at 93.8% of the GPU"}},
		{name: "DDP out of memory", status: Pass,
			run:      mkRun([]spec{{id: "d", set: set("zero.stage", "0"), outcome: store.OOM}, zero("z2", "2", 60<<30, 80)}, gpu),
			contains: []string{"ran out of memory"}},
		{name: "min_loss raised", status: Pass, run: mkRun([]spec{ddp("d", 30<<30, 100), zero("z1", "1", 24<<30, 90)}, gpu),
			cfg: Config{Thresholds: map[string]map[string]float64{"zero-memory-not-time": {"min_loss": 0.2}}}},
		{name: "no twin", status: NotApplicable, run: mkRun([]spec{zero("z1", "1", 24<<30, 90)}, gpu)},
		{name: "CPU run", status: NotApplicable, run: mkRun([]spec{ddp("d", 30<<30, 100), zero("z1", "1", 24<<30, 90)})},
		{name: "no ZeRO", status: NotApplicable, run: mkRun([]spec{ddp("d", 30<<30, 100)}, gpu)},
	})
}

func TestZeroGatherOverlapOff(t *testing.T) {
	on, off := set("zero.stage", "1", "zero.overlap_gather", "true"), set("zero.stage", "1", "zero.overlap_gather", "false")
	runCases(t, "zero-gather-overlap-off", []ruleCase{
		// 30 ms of exposed communication, of which 12 ms the all-gather's
		// wait (the rest ZeRO-2's reduce-scatters): the finding names the wait.
		{name: "baseline off, no pair", status: Finding,
			run: mkRun([]spec{{id: "a", set: off, ranks: 2, thr: 90, stepMS: 100, step: gatherWait(dpSteps(4, 25*mib, 40, 30, 30), 12)}},
				withBaseline("zero.overlap_gather", "false")),
			contains: []string{"exposing 12 ms (gather_wait_ms) of a 100 ms step", "use zero.overlap_gather: true"}},
		{name: "baseline off, no gather_wait_ms recorded", status: Finding,
			run: mkRun([]spec{{id: "a", set: off, ranks: 2, thr: 90, stepMS: 100, step: dpSteps(4, 25*mib, 40, 30, 30)}},
				withBaseline("zero.overlap_gather", "false")),
			contains: []string{"exposing an unrecorded wait (no gather_wait_ms in its records; 30 ms of communication exposed in all)"}},
		{name: "best off while on was faster", status: Finding,
			run: mkRun([]spec{{id: "on", set: on, ranks: 2, thr: 130, stepMS: 77}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}},
				withBaseline("zero.overlap_gather", "false")),
			contains: []string{"overlapped all-gather was 1.30× faster"}, trials: []string{"on", "off"}},
		{name: "off measured faster", status: Pass,
			run: mkRun([]spec{{id: "on", set: on, ranks: 2, thr: 90, stepMS: 110}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}},
				withBaseline("zero.overlap_gather", "false")),
			contains: []string{"exposed all-gather was measured faster"}},
		{name: "on everywhere", status: Pass,
			run: mkRun([]spec{{id: "on", set: on, ranks: 2, thr: 130, stepMS: 77}, {id: "off", set: off, ranks: 2, thr: 100, stepMS: 100}})},
		{name: "no ZeRO", status: NotApplicable, run: mkRun([]spec{{id: "a", ranks: 2, thr: 90, stepMS: 100}})},
	})
}

// gatherWait adds ZeRO's all-gather wait (gather_wait_ms) to step.
func gatherWait(step func(int, int, *engine.StepMetrics), waitMS float64) func(int, int, *engine.StepMetrics) {
	return func(r, i int, s *engine.StepMetrics) {
		step(r, i, s)
		s.GatherWaitMS = waitMS
	}
}
