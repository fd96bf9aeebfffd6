package knobs

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Setting is what the rules need to know about a trial beyond its knobs.
type Setting struct {
	Device    string // cpu | cuda | auto
	Ranks     int    // total ranks (processes) of the trial
	World     int    // ranks that form one communicator; 0: Ranks (procs_per_gpu > 1 runs independent replicas)
	AllowNVLS bool   // the study set sweep.allow_nvls: true
	Family    string // gpt | bert | resnet50; "": not judged
	// ComputeCap is the compute capability of the GPUs the plan is for (89 =
	// 8.9), where the planner could read it (NVML on the node); 0: unknown.
	ComputeCap int
	// The model's attention heads (engine.ShapeOf; 0: not judged) and its
	// name for messages ("gpt 350m"): tensor parallelism splits the heads.
	Heads int
	Model string
	// Nodes and RanksPerNode place the ranks (0: one node); a tensor group
	// spanning nodes is refused unless AllowTPAcrossNodes (the study set
	// sweep.allow_tp_across_nodes: true).
	Nodes, RanksPerNode int
	AllowTPAcrossNodes  bool
	// Rehearse: the plan is for a rehearsal (run --rehearse, plan --rehearse,
	// workload.rehearse): ranks share the GPUs through host-staged Gloo groups,
	// not NCCL.
	Rehearse bool
}

// FP8ComputeCap is the lowest compute capability with FP8 tensor cores (Ada).
const FP8ComputeCap = 89

// Check returns why a trial should not be planned, "" when it may run.
// Invalid combinations (a forced NCCL algorithm with one rank, more pipeline
// stages than ranks, NVLS without allow_nvls, ...) are judged on the resolved
// values; settings that would have no effect (DDP knobs with one data-parallel
// rank, NCCL knobs on cpu, ...) only for the knobs the trial changes from the
// study's baseline, so a baseline value never empties a plan. Graphs with
// more than one rank in the communicator are invalid (the engine captures one
// rank's step only). Graphs on cpu are kept on purpose: the engine refuses
// them and the trial is recorded as unsupported.
func Check(values map[string]string, changed map[string]bool, s Setting) string {
	get := func(name string) string {
		if v, ok := values[name]; ok {
			return v
		}
		if k, ok := Lookup(name); ok {
			return k.Default
		}
		return ""
	}
	atoi := func(name string) int { n, _ := strconv.Atoi(get(name)); return n }
	world := s.World
	if world <= 0 {
		world = s.Ranks
	}

	algo := get("nccl.algo")
	if IsNVLS(algo) && !s.AllowNVLS {
		return fmt.Sprintf("nccl.algo=%s needs NVLink multicast, which casestudy keeps off (NCCL_NVLS_ENABLE=0); set sweep.allow_nvls: true to plan it", algo)
	}
	for _, name := range []string{"nccl.algo", "nccl.proto"} {
		if v := get(name); !Unforced(v) && world <= 1 {
			return fmt.Sprintf("%s=%s needs more than one rank in the communicator (this trial has %d): with one rank there is no collective to tune", name, v, world)
		}
	}
	if get("mps") == "true" && s.Device == "cpu" {
		return "mps needs device cuda (this study runs on cpu)"
	}
	lo, hi := get("nccl.min_channels"), get("nccl.max_channels")
	if !Unforced(lo) && !Unforced(hi) && atoi("nccl.max_channels") < atoi("nccl.min_channels") {
		return fmt.Sprintf("nccl.max_channels=%s is below nccl.min_channels=%s", hi, lo)
	}
	stages := max(atoi("pipeline.stages"), 1)
	if stages > world {
		return fmt.Sprintf("pipeline.stages=%d exceeds the trial's %d ranks", stages, world)
	}
	if world%stages != 0 {
		return fmt.Sprintf("pipeline.stages=%d does not divide the trial's %d ranks", stages, world)
	}
	if b := Balance(get("pipeline.balance")); b != nil && len(b) != stages {
		return fmt.Sprintf("pipeline.balance=%s has %d entries for %d pipeline stages", get("pipeline.balance"), len(b), stages)
	}
	if r := tpReason(get, world, stages, s); r != "" {
		return r
	}
	dp := LayoutOf(values, world).DP
	if z := get("zero.stage"); z != "0" && z != "" {
		switch {
		case stages > 1:
			return fmt.Sprintf("zero.stage=%s with pipeline.stages=%d: the engine shards over plain data-parallel ranks only (not under a pipeline yet)", z, stages)
		case dp <= 1:
			return fmt.Sprintf("zero.stage=%s needs more than one data-parallel rank (this trial has %d: ranks %d, %spipeline.stages %d): with one rank there is nothing to shard", z, dp, world, tpPhrase(get), stages)
		case z == "2" && get("ddp.compression") != "none":
			return fmt.Sprintf("zero.stage=2 reduce-scatters fp32 gradients: ddp.compression=%s is not supported with it (use zero.stage 1)", get("ddp.compression"))
		}
	}
	if r := fp8Reason(get("precision"), s); r != "" {
		return r
	}
	if r := fusionReason(get, s); r != "" {
		return r
	}
	if get("graphs") == "true" && world > 1 {
		return fmt.Sprintf("graphs=true with %d ranks in the communicator: the engine captures the step of a single rank only (no data parallel or pipeline stages yet); set graphs: false", world)
	}

	// No-effect rules: only for what the trial changes.
	names := make([]string, 0, len(changed))
	for n, c := range changed {
		if c {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		v := get(n)
		switch {
		case s.Device == "cpu" && (strings.HasPrefix(n, "nccl.") || strings.HasPrefix(n, "cuda.")) && v != Auto:
			return fmt.Sprintf("%s=%s has no effect on device cpu (ranks communicate through Gloo)", n, v)
		case strings.HasPrefix(n, "ddp.") && dp <= 1:
			return fmt.Sprintf("%s=%s has no effect with one data-parallel rank (ranks %d, %spipeline.stages %d)", n, v, world, tpPhrase(get), stages)
		case strings.HasPrefix(n, "ddp.") && tpNoReducer(get, n) != "":
			return fmt.Sprintf("%s=%s has no effect with %s", n, v, tpNoReducer(get, n))
		case strings.HasPrefix(n, "ddp.") && stages > 1:
			return fmt.Sprintf("%s=%s has no effect with pipeline.stages=%d: a pipeline averages each stage's gradients in one flat all-reduce over its replicas, not through the bucketed reducer the ddp.* knobs configure", n, v, stages)
		case n == "zero.overlap_gather" && (get("zero.stage") == "0" || get("zero.stage") == ""):
			return fmt.Sprintf("zero.overlap_gather=%s has no effect with zero.stage 0 (no parameter all-gather)", v)
		case n == "zero.overlap_gather" && tpGatherInStep(get, s) != "":
			return fmt.Sprintf("zero.overlap_gather=%s has no effect with %s", v, tpGatherInStep(get, s))
		case n == "ddp.topk_ratio" && get("ddp.compression") != "topk":
			return fmt.Sprintf("ddp.topk_ratio=%s has no effect unless ddp.compression is topk", v)
		// With one stage, pipeline.microbatches is gradient accumulation (issue 9):
		// only the schedule and the balance lose their meaning.
		case (n == "pipeline.schedule" || n == "pipeline.balance") && stages == 1:
			return fmt.Sprintf("%s=%s has no effect without pipeline stages (pipeline.stages=1)", n, v)
		case strings.HasPrefix(n, "fp8.") && get("precision") != "fp8":
			return fmt.Sprintf("%s=%s has no effect unless precision is fp8 (precision=%s)", n, v, get("precision"))
		case n == "mps.active_thread_pct" && v != Auto && get("mps") != "true":
			return fmt.Sprintf("mps.active_thread_pct=%s has no effect unless mps is true", v)
		}
	}
	return ""
}

// fusionReason says why resnet.fusion=cudnn cannot run in this trial (the
// engine refuses the same at init, and where its build lacks cuDNN's
// backend headers). The knob is resnet50's only (Families): a study of
// another family that sets or sweeps it is refused at load, with its
// position (study/build.go), so no trial of one reaches this.
func fusionReason(get func(string) string, s Setting) string {
	if get("resnet.fusion") != "cudnn" {
		return ""
	}
	switch {
	case s.Device == "cpu":
		return "resnet.fusion=cudnn runs cuDNN's fused convolutions on CUDA only; this study runs on cpu"
	case get("precision") != "fp16":
		return fmt.Sprintf("resnet.fusion=cudnn: cuDNN's ConvBNfprop takes fp16 only on the H100 (docs/resnet-fusion.md); precision=%s", get("precision"))
	case get("channels_last") != "true":
		return "resnet.fusion=cudnn: cuDNN's ConvBNfprop takes NHWC tensors only: set channels_last true"
	case get("activation_checkpointing") == "true":
		return "resnet.fusion=cudnn does not run under activation checkpointing yet: set activation_checkpointing false"
	}
	return ""
}

// fp8Reason says why precision p cannot run in setting s: FP8 is the linear
// layers of gpt and bert on FP8 tensor cores (the engine refuses the rest at
// init with the same reasons).
func fp8Reason(p string, s Setting) string {
	if p != "fp8" {
		return ""
	}
	switch {
	case s.Family == "resnet50":
		return "precision=fp8 puts the linear layers of gpt and bert in FP8; resnet50 is convolutions, which have no FP8 path: use bf16"
	case s.Device == "cpu":
		return "precision=fp8 needs FP8 tensor cores (device cuda, compute capability 8.9 or more: Ada, Hopper, Blackwell); this study runs on cpu"
	case s.ComputeCap > 0 && s.ComputeCap < FP8ComputeCap:
		return fmt.Sprintf("precision=fp8 needs FP8 tensor cores (compute capability 8.9 or more: Ada, Hopper, Blackwell); this node's GPUs are %d.%d", s.ComputeCap/10, s.ComputeCap%10)
	}
	return ""
}
