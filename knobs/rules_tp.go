package knobs

import (
	"fmt"
	"strconv"
)

// TPLayout is how a trial's ranks split: tensor-fastest, then data, then
// pipeline (rank = t + TP*(d + DP*p), engine/native/src/tp.h's Mesh).
type TPLayout struct {
	TP, DP, PP int
}

// LayoutOf is the layout of world ranks with these knob values (missing knobs
// take their defaults); DP is at least 1.
func LayoutOf(values map[string]string, world int) TPLayout {
	atoi := func(name string) int {
		v, ok := values[name]
		if !ok {
			if k, found := Lookup(name); found {
				v = k.Default
			}
		}
		n, _ := strconv.Atoi(v)
		return max(n, 1)
	}
	l := TPLayout{TP: atoi("tp.degree"), PP: atoi("pipeline.stages")}
	l.DP = max(world/(l.TP*l.PP), 1)
	return l
}

// TensorRank, DataRank and StageOf place a rank in the layout.
func (l TPLayout) TensorRank(rank int) int { return rank % max(l.TP, 1) }

// DataRank is the rank's data-parallel index.
func (l TPLayout) DataRank(rank int) int { return (rank / max(l.TP, 1)) % max(l.DP, 1) }

// tpReason says why a tensor-parallel trial cannot run ("" when it may): the
// combinations the engine builds a mesh for (docs/tensor-parallel.md). The
// vocabulary needs no rule: the engine pads it with zero rows to a multiple
// of the degree (GPT-2's 50257 divides by none), masking the padding's logits.
func tpReason(get func(string) string, world, stages int, s Setting) string {
	tp, _ := strconv.Atoi(get("tp.degree"))
	sp := get("tp.sequence_parallel") == "true"
	if tp <= 1 {
		if sp {
			return "tp.sequence_parallel=true needs tp.degree > 1: it splits the sequence across a tensor-parallel group, and tp.degree=1 has none"
		}
		return ""
	}
	if s.Family == "resnet50" {
		return fmt.Sprintf("tp.degree=%d: ResNet-50 is not tensor-parallel (its convolutions have no Megatron split in the engine); use data parallel or pipeline.stages", tp)
	}
	if s.Heads > 0 && s.Heads%tp != 0 {
		return fmt.Sprintf("tp.degree=%d does not divide the %d attention heads of %s: every tensor rank holds whole heads (use a degree that divides %d)", tp, s.Heads, s.Model, s.Heads)
	}
	if r := tpEngineReason(get, tp, stages, s); r != "" {
		return r
	}
	if world%(tp*stages) != 0 {
		return fmt.Sprintf("tp.degree=%d x pipeline.stages=%d = %d does not divide the trial's %d ranks", tp, stages, tp*stages, world)
	}
	if s.Nodes > 1 && s.RanksPerNode%tp != 0 && !s.AllowTPAcrossNodes {
		return fmt.Sprintf("tp.degree=%d with %d ranks per node: a tensor group would span nodes, putting two all-reduces per layer "+
			"in the forward and two in the backward on the inter-node network; use a degree that divides %d, or set "+
			"sweep.allow_tp_across_nodes: true to measure it", tp, s.RanksPerNode, s.RanksPerNode)
	}
	return ""
}

// tpPhrase is "tp.degree N, " for a tensor-parallel trial, "" otherwise: the
// layout in the data-parallel rules' messages.
func tpPhrase(get func(string) string) string {
	if tp, _ := strconv.Atoi(get("tp.degree")); tp > 1 {
		return fmt.Sprintf("tp.degree %d, ", tp)
	}
	return ""
}

// tpEngineReason: the combinations the engine does not build with tensor
// parallelism yet, refused here with the engine's own reasons (check_tp in
// engine/native/src/config.cpp refuses the same at init), so a plan never
// holds a trial that can only come back unsupported.
func tpEngineReason(get func(string) string, tp, stages int, s Setting) string {
	what := fmt.Sprintf("tp.degree=%d", tp)
	switch {
	case stages > 1 && BalanceBy(get("pipeline.balance")) == BalanceTime:
		return fmt.Sprintf("%s with pipeline.stages=%d and pipeline.balance=time is not implemented (the layer timing runs the whole model on one rank): use pipeline.balance=params or layers per stage", what, stages)
	case get("graphs") == "true":
		return what + " with graphs=true is not implemented"
	case get("precision") == "fp8":
		return what + " with precision=fp8 is not implemented (the tensor-parallel layers are plain linear layers): use bf16"
	case get("activation_checkpointing") == "true":
		return what + " with activation_checkpointing=true is not implemented"
	case get("ddp.compression") != "none" && get("ddp.compression") != "":
		return fmt.Sprintf("%s with ddp.compression=%s is not implemented: the data-parallel group all-reduces uncompressed gradients", what, get("ddp.compression"))
	}
	return ""
}

// tpNoReducer says why the ddp.* knob name does nothing in a tensor-parallel
// trial ("" without tp, or where it acts): without ZeRO the engine averages
// the data-parallel group's gradients in one flat all-reduce after the
// backward (docs/tensor-parallel.md), not through the bucketed, overlapped
// reducer they configure; with zero.stage > 0 ZeRO's buckets follow
// ddp.bucket_mb and ddp.first_bucket_mb, but they are reduced after the
// backward (docs/zero.md), so ddp.overlap still does nothing.
func tpNoReducer(get func(string) string, name string) string {
	tp, _ := strconv.Atoi(get("tp.degree"))
	if tp <= 1 {
		return ""
	}
	if z := get("zero.stage"); z != "0" && z != "" {
		if name != "ddp.overlap" {
			return ""
		}
		return fmt.Sprintf("tp.degree=%d and zero.stage=%s: ZeRO reduces the data-parallel group's buckets after the backward (the group's collectives are synchronous), never overlapped with it", tp, z)
	}
	return fmt.Sprintf("tp.degree=%d: the engine averages the data-parallel group's gradients in one flat all-reduce after the backward, not through the bucketed reducer the ddp.* knobs configure", tp)
}

// tpGatherInStep says why ZeRO's all-gathers stay in the step whatever
// zero.overlap_gather says, "" when it takes effect: under tensor parallelism
// on CUDA ranks over NCCL groups (not a rehearsal's host-staged groups, not
// CPU ranks), trainer.cpp runs the all-gathers synchronously, as off, and
// cs_info's zero object says overlap_gather false: on a second thread they
// would run beside the forward's tensor-group collectives, issued by two
// threads in an order that may differ between ranks, which NCCL documents as
// a possible deadlock. A device of auto is not judged (the planner cannot
// tell).
func tpGatherInStep(get func(string) string, s Setting) string {
	tp, _ := strconv.Atoi(get("tp.degree"))
	if z := get("zero.stage"); tp <= 1 || z == "0" || z == "" || s.Device != "cuda" || s.Rehearse {
		return ""
	}
	return fmt.Sprintf("tp.degree=%d on device cuda: over NCCL groups the engine keeps ZeRO's all-gathers in the step "+
		"(overlapping them on a second thread beside the tensor group's collectives could deadlock NCCL; cs_info "+
		"reports overlap_gather false); a rehearsal and CPU ranks do overlap them", tp)
}
