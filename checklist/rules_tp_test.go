package checklist

import (
	"fmt"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// withNodes puts the ranks of every launch on nodes of perNode ranks.
func withNodes(run *store.Run, perNode int) *store.Run {
	for i := range run.Trials {
		for j := range run.Trials[i].Repeats {
			for k := range run.Trials[i].Repeats[j].Ranks {
				rk := &run.Trials[i].Repeats[j].Ranks[k]
				rk.Node = fmt.Sprintf("n%d", rk.Rank/perNode)
			}
		}
	}
	return run
}

func TestTPAcrossNodes(t *testing.T) {
	gpu := onGPUs(4, "NVIDIA H100 80GB HBM3", 80<<30, 18, "")
	tp := func(id, degree string) spec {
		return spec{id: id, set: set("tp.degree", degree), ranks: 8, thr: 100, stepMS: 100,
			step: func(_, _ int, s *engine.StepMetrics) { s.CommMS, s.ExposedCommMS = 30, 20 }}
	}
	twoNodes := func(m *store.Manifest) { m.Workload["nodes"] = float64(2) }
	runCases(t, "tp-across-nodes", []ruleCase{
		{name: "tp 8 on two nodes of 4", status: Finding,
			run:      withNodes(mkRun([]spec{tp("a", "4"), tp("b", "8")}, gpu), 4),
			contains: []string{"tensor group 0 (ranks 0-7): n0, n1", "communication 30.0 ms of a 100.0 ms step, 20.0 ms of it exposed", "divisor of the GPUs per node"},
			trials:   []string{"b"}},
		{name: "tp 4 inside nodes of 4", status: Pass, run: withNodes(mkRun([]spec{tp("a", "4"), tp("c", "2")}, gpu), 4),
			contains: []string{"2 tensor-parallel trial(s): every tensor group stays inside one node"}},
		{name: "no recorded nodes: even placement", status: Finding, run: mkRun([]spec{tp("b", "8")}, gpu, twoNodes),
			contains: []string{"node 0, node 1"}},
		{name: "one node", status: Pass, run: mkRun([]spec{tp("b", "8")}, gpu)},
		{name: "no tp", status: NotApplicable, run: mkRun([]spec{{id: "d", ranks: 8, thr: 100, stepMS: 100}}, gpu)},
	})
}

func TestSPSmallDegree(t *testing.T) {
	gpu := onGPUs(8, "NVIDIA H100 80GB HBM3", 80<<30, 18, "")
	tr := func(id, degree, sp string, mem int64, thr float64) spec {
		return spec{id: id, set: set("tp.degree", degree, "tp.sequence_parallel", sp), ranks: 8, thr: thr, stepMS: 1000 / thr, mem: mem}
	}
	runCases(t, "tp-sequence-parallel-small-degree", []ruleCase{
		{name: "tp 2: slower, little saved", status: Finding,
			run:      mkRun([]spec{tr("a", "2", "false", 20<<30, 100), tr("b", "2", "true", 19<<30, 95)}, gpu),
			contains: []string{"peaks at 19.0 GiB against 20.0 GiB", "5.00% saved", "0.950x", "leave tp.sequence_parallel false"},
			trials:   []string{"a", "b"}},
		{name: "tp 2: saves enough", status: Pass,
			run:      mkRun([]spec{tr("a", "2", "false", 20<<30, 100), tr("b", "2", "true", 16<<30, 95)}, gpu),
			contains: []string{"20.0% saved"}},
		{name: "tp 2: as fast", status: Pass,
			run: mkRun([]spec{tr("a", "2", "false", 20<<30, 100), tr("b", "2", "true", 19<<30, 99.5)}, gpu)},
		{name: "tp 4 is not small", status: NotApplicable,
			run: mkRun([]spec{tr("a", "4", "false", 20<<30, 100), tr("b", "4", "true", 19<<30, 90)}, gpu)},
		{name: "max_degree raised", status: Finding,
			run: mkRun([]spec{tr("a", "4", "false", 20<<30, 100), tr("b", "4", "true", 19<<30, 90)}, gpu),
			cfg: Config{Thresholds: map[string]map[string]float64{"tp-sequence-parallel-small-degree": {"max_degree": 4}}}},
		{name: "no twin", status: NotApplicable, run: mkRun([]spec{tr("b", "2", "true", 19<<30, 95)}, gpu)},
		{name: "no memory measured", status: NotApplicable,
			run: mkRun([]spec{tr("a", "2", "false", 0, 100), tr("b", "2", "true", 0, 95)})},
	})
}

func TestTPMemoryNotTime(t *testing.T) {
	gpu := onGPUs(8, "NVIDIA H100 80GB HBM3", 80<<30, 18, "")
	tr := func(id, degree string, mem int64, thr float64) spec {
		return spec{id: id, set: set("tp.degree", degree), ranks: 8, thr: thr, stepMS: 1000 / thr, mem: mem}
	}
	runCases(t, "tp-memory-not-time", []ruleCase{
		{name: "slower with room", status: Finding, run: mkRun([]spec{tr("d", "1", 30<<30, 100), tr("t2", "2", 18<<30, 80)}, gpu),
			contains: []string{"20.0% slower than its tp.degree 1 twin d", "37.5% of 80.0 GiB", "keep tp.degree: 1"},
			trials:   []string{"t2", "d"}},
		{name: "data parallel near the limit", status: Pass, run: mkRun([]spec{tr("d", "1", 75<<30, 100), tr("t2", "2", 40<<30, 80)}, gpu),
			contains: []string{"peaked at 93.8% of the GPU"}},
		{name: "data parallel out of memory", status: Pass,
			run:      mkRun([]spec{{id: "d", set: set("tp.degree", "1"), outcome: store.OOM}, tr("t8", "8", 20<<30, 50)}, gpu),
			contains: []string{"ran out of memory"}},
		{name: "no twin", status: NotApplicable, run: mkRun([]spec{tr("t2", "2", 18<<30, 80)}, gpu)},
		// studies/gpt/tp.yaml: the global batch stays 32 on 8 ranks, so micro_batch
		// grows with tp.degree (4 ranks of 8 at tp 2), sequence parallel or not.
		{name: "same global batch", status: Finding, run: mkRun([]spec{
			{id: "d", set: set("tp.degree", "1", "micro_batch", "4"), ranks: 8, thr: 100, stepMS: 10, mem: 30 << 30},
			{id: "t2", set: set("tp.degree", "2", "micro_batch", "8", "tp.sequence_parallel", "true"), ranks: 8, thr: 80, stepMS: 12.5, mem: 18 << 30},
		}, gpu), contains: []string{"20.0% slower than its tp.degree 1 twin d"}, trials: []string{"t2", "d"}},
		{name: "another global batch", status: NotApplicable, run: mkRun([]spec{
			{id: "d", set: set("tp.degree", "1", "micro_batch", "4"), ranks: 8, thr: 100, stepMS: 10, mem: 30 << 30},
			{id: "t2", set: set("tp.degree", "2", "micro_batch", "6"), ranks: 8, thr: 80, stepMS: 12.5, mem: 18 << 30},
		}, gpu)}, // 6 x 4 data-parallel ranks against 4 x 8
		{name: "no tp", status: NotApplicable, run: mkRun([]spec{tr("d", "1", 30<<30, 100)}, gpu)},
	})
}
