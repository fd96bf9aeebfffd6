package checklist

import (
	"fmt"
	"slices"
	"strings"
)

// Tensor-parallel rules: where a tensor group's ranks run, and what sequence
// parallelism buys at a small degree.

var tpRules = []*Rule{
	{
		ID: "tp-memory-not-time", Title: "Tensor parallelism where memory is not the limit", Chapter: 12, Severity: Warning,
		Rationale: "Tensor parallelism divides a rank's weights, gradients, optimizer states and most activations by " +
			"tp.degree, for collectives on the critical path of every block and smaller matrix products. Like ZeRO " +
			"(zero-memory-not-time, whose judgement it shares), it pays where plain data parallelism runs out of " +
			"memory or near it; where data parallelism fits with room, it is communication for nothing. Each " +
			"tensor-parallel trial is judged against its twin with tp.degree 1 (every other knob equal), or else the " +
			"one at the same global batch (every other knob equal but micro_batch and tp.sequence_parallel).",
		Needs: []string{"knob tp.degree", "mem_peak_bytes", "GPU memory", "oom outcomes"},
		Thresholds: []Threshold{
			{Name: "near_limit", Default: 0.80, Unit: "fraction", Doc: "the tp.degree 1 twin's peak memory share of the GPU that counts as near the limit"},
			{Name: "min_loss", Default: 0.03, Unit: "fraction", Doc: "slowdown against the tp.degree 1 twin that counts"},
		},
		check: func(c *evalContext) verdict {
			return checkShardingMemory(c, sharding{knob: "tp.degree", off: "1", name: "tensor-parallel", twin: "tp.degree 1 twin",
				free: []string{"micro_batch", "tp.sequence_parallel"},
				none: "no completed tensor-parallel trial (tp.degree > 1)",
				recommendation: "keep tp.degree: 1 (data parallel) for this model on this machine, or spend the memory tensor " +
					"parallelism frees on a larger micro_batch or model"})
		},
	},
	{
		ID: "tp-across-nodes", Title: "Tensor parallelism across nodes", Chapter: 12, Severity: Warning,
		Rationale: "A tensor-parallel group all-reduces (or all-gathers and reduce-scatters) activations twice per " +
			"transformer block in the forward pass and twice in the backward, on the critical path: nothing " +
			"overlaps them. Megatron-LM keeps each tensor group inside a node, on NVLink, and spreads data and " +
			"pipeline parallelism across nodes. A group whose ranks sit on different nodes sends those collectives " +
			"over the network, a tenth of NVLink's bandwidth or less. Ranks are tensor-fastest (rank = t + " +
			"tp.degree x (d + dp x p)); the node of each rank comes from the records (else the even placement " +
			"of workload.nodes). The planner refuses such trials unless the study sets sweep.allow_tp_across_nodes.",
		Needs: []string{"knob tp.degree", "each rank's node", "workload nodes", "comm_ms", "exposed_comm_ms"},
		check: checkTPAcrossNodes,
	},
	{
		ID: "tp-sequence-parallel-small-degree", Title: "Sequence parallelism at a small tensor degree", Chapter: 12, Severity: Info,
		Rationale: "Sequence parallelism splits the activations outside the tensor-parallel regions (LayerNorm " +
			"inputs, dropout masks, about 10 of the 34 bytes per token and hidden unit of a block, Korthikanti et " +
			"al. 2022) across the tensor group, and replaces each all-reduce by an all-gather and a reduce-scatter. " +
			"At tp.degree 2 it saves half of that share only, and the split collectives and the LayerNorm " +
			"weight-gradient all-reduce are extra launches: it pays where activation memory is the limit at a " +
			"larger degree. Each sequence-parallel trial at a degree up to max_degree is judged against its twin " +
			"without it (every other knob equal), on measured peak memory and throughput.",
		Needs: []string{"knob tp.degree", "knob tp.sequence_parallel", "mem_peak_bytes", "throughput"},
		Thresholds: []Threshold{
			{Name: "max_degree", Default: 2, Unit: "ranks", Doc: "the largest tp.degree judged as small"},
			{Name: "min_saving", Default: 0.10, Unit: "fraction", Doc: "peak-memory saving against the twin that counts as worth it"},
			{Name: "min_loss", Default: 0.02, Unit: "fraction", Doc: "slowdown against the twin that counts"},
		},
		check: checkSPSmallDegree,
	},
}

// tensorGroupNodes is each tensor group of t (ranks [g*tp, (g+1)*tp)) that
// spans nodes, as "group g (ranks a-b): nodes x, y", from the ranks' recorded
// nodes or, where none is recorded, the even placement over nodes.
func tensorGroupNodes(t *trial, nodes int) []string {
	tp := t.tensorParallel()
	node := map[int]string{}
	for _, rp := range t.rec.Repeats {
		for _, rk := range rp.Ranks {
			if rk.Node != "" {
				node[rk.Rank] = rk.Node
			}
		}
	}
	world := max(t.World, 1)
	if len(node) == 0 {
		if nodes <= 1 {
			return nil
		}
		per := (world + nodes - 1) / nodes
		for r := 0; r < world; r++ {
			node[r] = fmt.Sprintf("node %d", r/per)
		}
	}
	var out []string
	for g := 0; g*tp < world; g++ {
		var in []string
		for r := g * tp; r < (g+1)*tp && r < world; r++ {
			if n, ok := node[r]; ok && !slices.Contains(in, n) {
				in = append(in, n)
			}
		}
		if len(in) > 1 {
			out = append(out, fmt.Sprintf("tensor group %d (ranks %d-%d): %s", g, g*tp, min((g+1)*tp, world)-1, strings.Join(in, ", ")))
		}
	}
	return out
}

func checkTPAcrossNodes(c *evalContext) verdict {
	nodes, _ := c.run.workloadInt("nodes")
	var tps []*trial
	for _, t := range c.run.all {
		if t.tensorParallel() > 1 && len(t.rec.Repeats) > 0 {
			tps = append(tps, t)
		}
	}
	if len(tps) == 0 {
		return na("no tensor-parallel trial (tp.degree > 1) with a launch")
	}
	var evidence, trials []string
	for _, t := range tps {
		spans := tensorGroupNodes(t, nodes)
		if len(spans) == 0 {
			continue
		}
		line := fmt.Sprintf("%s: %d of its tensor groups span nodes (%s)", t.label(), len(spans), spans[0])
		if t.StepMS > 0 && t.CommMS > 0 {
			line += fmt.Sprintf("; communication %.1f ms of a %.1f ms step, %.1f ms of it exposed", t.CommMS, t.StepMS, t.ExposedMS)
		}
		evidence = append(evidence, line)
		trials = append(trials, t.ID)
	}
	if len(evidence) == 0 {
		return pass("%d tensor-parallel trial(s): every tensor group stays inside one node", len(tps))
	}
	return verdict{
		Status:   Finding,
		Message:  fmt.Sprintf("%d tensor-parallel trial(s) put a tensor group on several nodes: %s", len(evidence), evidence[0]),
		Evidence: limit(evidence, 8),
		Trials:   trials,
		Recommendation: "keep tp.degree a divisor of the GPUs per node (tensor groups on NVLink) and use data or pipeline " +
			"parallelism across nodes",
	}
}

func checkSPSmallDegree(c *evalContext) verdict {
	var sps []*trial
	for _, t := range c.run.ok {
		if t.knob("tp.sequence_parallel") == "true" && t.tensorParallel() > 1 && float64(t.tensorParallel()) <= c.t("max_degree") {
			sps = append(sps, t)
		}
	}
	if len(sps) == 0 {
		return na("no completed sequence-parallel trial at tp.degree %.0f or less", c.t("max_degree"))
	}
	var evidence, trials, fine []string
	judged := 0
	for _, t := range sps {
		tw := c.run.twin(t, "tp.sequence_parallel", "false")
		if tw == nil || tw.MemPeak == 0 || t.MemPeak == 0 || !(speedup(t, tw) > 0) {
			continue
		}
		judged++
		saving := 1 - float64(t.MemPeak)/float64(tw.MemPeak)
		sp := speedup(t, tw)
		line := fmt.Sprintf("%s peaks at %s against %s without sequence parallelism (%s, %s saved) and runs at %.3fx its speed",
			t.label(), gib(float64(t.MemPeak)), gib(float64(tw.MemPeak)), tw.ID, pct(saving), sp)
		if saving < c.t("min_saving") && sp < 1-c.t("min_loss") {
			evidence = append(evidence, line)
			trials = append(trials, t.ID, tw.ID)
		} else {
			fine = append(fine, line)
		}
	}
	if judged == 0 {
		return na("no sequence-parallel trial at a small degree has a measured twin with tp.sequence_parallel false (peak memory and throughput)")
	}
	if len(evidence) == 0 {
		return pass("%d sequence-parallel trial(s) at a small degree judged against their twins: none saves less than %s of peak memory while slower by %s or more; %s",
			judged, pct(c.t("min_saving")), pct(c.t("min_loss")), fine[0])
	}
	return verdict{
		Status:   Finding,
		Message:  fmt.Sprintf("sequence parallelism at a small tensor degree cost time for little memory: %s", evidence[0]),
		Evidence: limit(evidence, 8),
		Trials:   trials,
		Recommendation: "leave tp.sequence_parallel false at this degree, or use it where activation memory is the limit " +
			"(a larger tp.degree, a longer seq_len or a larger micro_batch)",
	}
}
