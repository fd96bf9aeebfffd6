package knobs

import (
	"fmt"
	"strconv"
	"strings"
)

// knobList is the registry. Keep entries grouped by how they are applied; the
// init in knob.go sorts them by name.
func knobList() []*Knob {
	auto := func(vs ...string) []string { return append(vs, Auto) }
	return []*Knob{
		// ---- NCCL (environment of every rank) ----
		{Name: "nccl.algo", Type: Enum, Apply: Env, EnvVar: "NCCL_ALGO", Chapter: 6, Default: Auto,
			Values:     auto("Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"),
			Constraint: "needs more than one rank; NVLS and NVLSTree are dropped unless sweep.allow_nvls is true",
			Doc: "Forces the algorithm NCCL uses for collectives (NCCL_ALGO). Ring is bandwidth-optimal on one node; " +
				"Tree halves latency at scale; CollNet needs SHARP-capable switches; PAT suits one GPU per node. " +
				"Forcing an algorithm a topology cannot run fails at communicator creation (nccl#317) or worse, so " +
				"the planner drops it for single-rank trials. NVLS/NVLSTree use NVLink multicast, which casestudy " +
				"keeps off (NCCL_NVLS_ENABLE=0 in every trial) unless a study sets sweep.allow_nvls: true."},
		{Name: "nccl.proto", Type: Enum, Apply: Env, EnvVar: "NCCL_PROTO", Chapter: 6, Default: Auto,
			Values:     auto("LL", "LL128", "Simple"),
			Constraint: "needs more than one rank",
			Doc: "Forces the NCCL protocol (NCCL_PROTO). LL (low latency, 8-byte flags) wins for small messages, " +
				"Simple for large ones, LL128 in between on NVLink. Forcing LL128 where the hardware does not " +
				"guarantee 128-byte atomicity has given wrong sums (nccl#786), so check gradients agree across ranks."},
		{Name: "nccl.min_channels", Type: Int, Min: "1", Max: "64", AutoOK: true, Apply: Env, EnvVar: "NCCL_MIN_NCHANNELS", Chapter: 6, Default: Auto,
			Doc: "Lower bound on the number of channels (rings/trees, each driven by one CUDA block) NCCL uses " +
				"(NCCL_MIN_NCHANNELS). More channels can reach more bandwidth at the cost of SMs taken from compute."},
		{Name: "nccl.max_channels", Type: Int, Min: "1", Max: "64", AutoOK: true, Apply: Env, EnvVar: "NCCL_MAX_NCHANNELS", Chapter: 6, Default: Auto,
			Constraint: "not below nccl.min_channels",
			Doc: "Upper bound on NCCL channels (NCCL_MAX_NCHANNELS). Lowering it leaves SMs to overlapping compute; " +
				"too low a value caps bus bandwidth."},
		{Name: "nccl.buffsize", Type: Size, Min: "65536", Max: "1073741824", AutoOK: true, Apply: Env, EnvVar: "NCCL_BUFFSIZE", Chapter: 6, Default: Auto,
			Doc: "Size of the buffer NCCL uses per channel and peer (NCCL_BUFFSIZE, default 4 MiB). Larger buffers " +
				"pipeline large messages better and cost device memory per peer."},
		{Name: "nccl.nthreads", Type: Enum, Values: auto("64", "128", "256", "512"), Apply: Env, EnvVar: "NCCL_NTHREADS", Chapter: 6, Default: Auto,
			Doc: "CUDA threads per NCCL block (NCCL_NTHREADS). Newer GPUs default to 512; fewer threads can help on " +
				"older GPUs with low clocks."},
		{Name: "nccl.p2p_level", Type: Enum, Values: auto("LOC", "NVL", "PIX", "PXB", "PHB", "SYS"), Apply: Env, EnvVar: "NCCL_P2P_LEVEL", Chapter: 4, Default: Auto,
			Doc: "The farthest topology distance at which NCCL still uses direct GPU peer-to-peer transfers " +
				"(NCCL_P2P_LEVEL): NVL NVLink only, PIX one PCIe switch, PXB several switches, PHB through the host " +
				"bridge, SYS across sockets. Compare with `nvidia-smi topo -m`."},
		{Name: "nccl.p2p_disable", Type: Bool, AutoOK: true, Apply: Env, EnvVar: "NCCL_P2P_DISABLE", Chapter: 4, Default: Auto,
			Doc: "Disables direct GPU peer-to-peer transport (NCCL_P2P_DISABLE=1), so traffic goes through shared " +
				"host memory or the network: the ablation that shows what NVLink/PCIe P2P is worth."},
		{Name: "nccl.shm_disable", Type: Bool, AutoOK: true, Apply: Env, EnvVar: "NCCL_SHM_DISABLE", Chapter: 8, Default: Auto,
			Doc: "Disables the shared-memory transport between processes (NCCL_SHM_DISABLE=1); with P2P also " +
				"disabled NCCL falls back to the network transport."},
		{Name: "nccl.ib_disable", Type: Bool, AutoOK: true, Apply: Env, EnvVar: "NCCL_IB_DISABLE", Chapter: 21, Default: Auto,
			Doc: "Disables the InfiniBand/RoCE transport (NCCL_IB_DISABLE=1) so inter-node traffic uses TCP sockets: " +
				"the baseline that shows what RDMA buys across nodes."},
		{Name: "nccl.debug", Type: Enum, Values: auto("VERSION", "WARN", "INFO", "TRACE"), Apply: Env, EnvVar: "NCCL_DEBUG", Chapter: 17, Default: Auto,
			Doc: "NCCL's log level (NCCL_DEBUG). INFO prints the topology, channels and the algorithm/protocol " +
				"chosen, kept per trial in logs/<trial>/; it costs a little start-up time, not step time."},
		{Name: "nccl.socket_ifname", Type: String, AutoOK: true, Apply: Env, EnvVar: "NCCL_SOCKET_IFNAME", Chapter: 21, Default: Auto,
			Doc: "Network interfaces NCCL uses for bootstrap and socket transport (NCCL_SOCKET_IFNAME, e.g. " +
				"`eth0`, `^docker,lo`). Needed when the default picks a slow or unreachable interface."},
		{Name: "nccl.net_gdr_level", Type: Enum, Values: auto("LOC", "PIX", "PXB", "PHB", "SYS"), Apply: Env, EnvVar: "NCCL_NET_GDR_LEVEL", Chapter: 7, Default: Auto,
			Doc: "The farthest distance between GPU and NIC at which NCCL uses GPUDirect RDMA " +
				"(NCCL_NET_GDR_LEVEL); beyond it, data is staged through host memory."},
		{Name: "nccl.ib_hca", Type: String, AutoOK: true, Apply: Env, EnvVar: "NCCL_IB_HCA", Chapter: 21, Default: Auto,
			Doc: "Which InfiniBand/RoCE adapters and ports NCCL uses (NCCL_IB_HCA, e.g. `mlx5_0:1,mlx5_1:1`, " +
				"`^mlx5_2`)."},
		{Name: "nccl.cross_nic", Type: Enum, Values: auto("0", "1", "2"), Apply: Env, EnvVar: "NCCL_CROSS_NIC", Chapter: 21, Default: Auto,
			Doc: "Whether rings/trees may use different NICs on different nodes (NCCL_CROSS_NIC): 0 keeps each " +
				"ring on one rail (rail-optimised fabrics), 1 allows crossing, 2 lets NCCL decide."},

		// ---- CUDA (environment) ----
		{Name: "cuda.device_max_connections", Type: Int, Min: "1", Max: "32", AutoOK: true, Apply: Env, EnvVar: "CUDA_DEVICE_MAX_CONNECTIONS", Chapter: 2, Default: Auto,
			Doc: "Hardware work queues between host and GPU (CUDA_DEVICE_MAX_CONNECTIONS, default 8). 1 serialises " +
				"kernel launches in issue order, which Megatron-style overlap relies on; more queues let streams " +
				"run concurrently."},

		{Name: "cudnn.benchmark_limit", Type: Enum, Values: auto("off", "0", "1", "2", "3", "10"), Apply: Env, EnvVar: "CASESTUDY_CUDNN_BENCHMARK_LIMIT", Chapter: 29, Default: Auto, Families: []string{"resnet50"},
			Doc: "cuDNN convolution autotuning in the first step of every launch (CASESTUDY_CUDNN_BENCHMARK_LIMIT): " +
				"auto is PyTorch's default (benchmark the 10 best candidates), N benchmarks N, 0 every one, off takes " +
				"cuDNN's heuristic choice. On the H200 (ResNet-50 256 x 224², 2026-12-03, scripts/gpu-check.sh stage cudnn) off " +
				"cut the first step from 3.6 s to 0.7 s at a steady step 0.3% slower; docs/perf.md."},

		// ---- engine ----
		{Name: "precision", Type: Enum, Values: []string{"fp32", "tf32", "bf16", "fp16", "fp8"}, Apply: Engine, Chapter: 23, Default: "fp32",
			Constraint: "fp8: gpt and bert only, on device cuda with FP8 tensor cores (compute capability 8.9 or more); " +
				"the planner drops it for resnet50, on cpu and on a node whose GPUs are older, and the engine refuses it there",
			Doc: "Numeric precision of the training step: fp32; tf32 (fp32 storage, TensorFloat-32 matmuls); bf16 " +
				"(autocast, fp32 master weights); fp16 (autocast with dynamic loss scaling: steps with inf/nan " +
				"gradients are skipped and counted); fp8 (bf16 autocast, and the transformer blocks' linear layers " +
				"multiply in FP8 through libtorch's scaled matmul: e4m3 activations and weights, gradients in " +
				"fp8.grad, scales from the current amax per fp8.scaling; docs/engine.md). Gradients are all-reduced " +
				"in the parameter dtype."},
		{Name: "fp8.scaling", Type: Enum, Values: []string{"tensor", "row"}, Apply: Engine, Chapter: 23, Default: "tensor", Families: []string{"gpt", "bert"},
			Constraint: "only with precision fp8",
			Doc: "How precision fp8 scales each operand into FP8's range (dynamic scaling, from the amax of the " +
				"current values): tensor, one scale per tensor; row, one per row of each operand (per output row " +
				"and weight row forward, along the other axis in the backward), closer to each value's range at " +
				"the cost of quantizing the backward's operands again."},
		{Name: "fp8.grad", Type: Enum, Values: []string{"e5m2", "e4m3"}, Apply: Engine, Chapter: 23, Default: "e5m2", Families: []string{"gpt", "bert"},
			Constraint: "only with precision fp8",
			Doc: "The FP8 format of the output gradients in precision fp8's backward matmuls: e5m2 (range, the " +
				"usual hybrid recipe) or e4m3 (precision, as the forward)."},
		{Name: "graphs", Type: Bool, Apply: Engine, Chapter: 27, Default: "false",
			Constraint: "needs device cuda (on cpu the engine refuses it and the trial is unsupported) and one rank " +
				"in the communicator (with data parallel or pipeline stages the planner drops the trial)",
			Doc: "Captures the whole training step (forward, backward, gradient all-reduce, optimizer) in a CUDA " +
				"Graph after warm-up and replays it, removing per-kernel launch overhead. Helps small, " +
				"launch-bound steps most."},
		{Name: "grad_accum", Type: Int, Min: "1", Max: "4096", Apply: Engine, Chapter: 13, Default: "1",
			Doc: "Micro-batches accumulated per optimizer step. Gradients are all-reduced once per step (DDP's " +
				"no_sync on the others), so accumulation trades memory for fewer collectives."},
		{Name: "micro_batch", Type: Int, Min: "1", Max: "65536", Apply: Engine, Chapter: 29, Default: "8",
			Doc: "Samples per micro-batch per rank (model.micro_batch sets it for a study). The global batch is " +
				"micro_batch x grad_accum x data-parallel ranks (x pipeline micro-batches)."},
		{Name: "seq_len", Type: Int, Min: "1", Max: "1048576", AutoOK: true, Apply: Engine, Chapter: 29, Default: Auto, Families: []string{"gpt", "bert"},
			Doc: "Tokens per sample (gpt, bert); auto keeps the preset's. Attention cost grows with its square."},
		{Name: "image_size", Type: Int, Min: "16", Max: "8192", AutoOK: true, Apply: Engine, Chapter: 29, Default: Auto, Families: []string{"resnet50"},
			Doc: "Pixels per image side (resnet50); auto is 224 (32 for the tiny preset)."},
		{Name: "activation_checkpointing", Type: Bool, Apply: Engine, Chapter: 29, Default: "false",
			Doc: "Recomputes each layer's activations in the backward pass instead of keeping them: about a " +
				"third more compute for much less activation memory, so larger micro-batches fit."},
		{Name: "channels_last", Type: Bool, Apply: Engine, Chapter: 29, Default: "false", Families: []string{"resnet50"},
			Doc: "Stores images and convolution weights in NHWC order (resnet50), which tensor-core convolutions " +
				"prefer under bf16/fp16."},
		{Name: "resnet.fusion", Type: Enum, Values: []string{"off", "cudnn"}, Apply: Engine, Chapter: 29, Default: "off", Families: []string{"resnet50"},
			Constraint: "cudnn only with precision fp16, channels_last true, device cuda, activation_checkpointing false and an " +
				"engine built with cuDNN 9's backend headers",
			Doc: "cudnn folds ResNet-50's batch norms into cuDNN's fused convolutions (ConvBNfprop): each bottleneck " +
				"block's convolutions write their output's batch-norm statistics, and conv3 applies bn2's scale, " +
				"bias and ReLU to its input as it loads it, so those batch-norm passes do not run " +
				"(docs/resnet-fusion.md). fp16 only: cuDNN has no bf16 engine for it on the H100."},
		{Name: "ddp.bucket_mb", Type: Float, Min: "0.001", Max: "4096", Apply: Engine, Chapter: 16, Default: "25",
			Constraint: "no effect with one data-parallel rank, with pipeline.stages > 1 or with tp.degree > 1 and zero.stage 0 (ZeRO's buckets follow it)",
			Doc: "Gradient bucket size in MiB for the data-parallel all-reduce (PyTorch DDP's bucket_cap_mb). " +
				"Small buckets start communication early but pay per-collective latency; large ones overlap less."},
		{Name: "ddp.first_bucket_mb", Type: Float, Min: "0.001", Max: "4096", Apply: Engine, Chapter: 11, Default: "1",
			Constraint: "no effect with one data-parallel rank, with pipeline.stages > 1 or with tp.degree > 1 and zero.stage 0 (ZeRO's buckets follow it)",
			Doc: "Size in MiB of the first bucket (the last layers' gradients, ready first), kept small so " +
				"communication starts as early as possible in the backward pass."},
		{Name: "ddp.overlap", Type: Bool, Apply: Engine, Chapter: 15, Default: "true",
			Constraint: "no effect with one data-parallel rank, with pipeline.stages > 1 or with tp.degree > 1",
			Doc: "Launches each bucket's all-reduce on a communication stream as soon as its gradients are ready " +
				"during backward; false waits for the whole backward first (the exposed-communication baseline)."},
		{Name: "ddp.compression", Type: Enum, Values: []string{"none", "fp16", "bf16", "topk"}, Apply: Engine, Chapter: 24, Default: "none",
			Constraint: "no effect with one data-parallel rank, with pipeline.stages > 1 or with tp.degree > 1",
			Doc: "Gradient compression before the all-reduce: fp16/bf16 casts halve the bytes; topk sends the " +
				"largest ratio of entries with error feedback (`topk:0.01`, or topk with ddp.topk_ratio).",
			parse: parseCompression},
		{Name: "ddp.topk_ratio", Type: Float, Min: "0.0001", Max: "1", Apply: Engine, Chapter: 24, Default: "0.01",
			Constraint: "only with ddp.compression topk",
			Doc:        "Fraction of gradient entries top-k compression sends per bucket."},
		{Name: "zero.stage", Type: Enum, Values: []string{"0", "1", "2"}, Apply: Engine, Chapter: 22, Default: "0",
			Constraint: "more than one data-parallel rank (with tp.degree > 1: its data group); no pipeline; stage 2 without ddp.compression",
			Doc: "ZeRO optimizer-state sharding across the data-parallel ranks (DeepSpeed stages; docs/zero.md): " +
				"1 keeps each rank's share of the AdamW/SGD states (DDP's all-reduce, a step on the shard, an " +
				"all-gather of the parameters); 2 also keeps only the shard's gradients (a reduce-scatter per " +
				"bucket in backward). Trades an all-gather per step for optimizer memory divided by the ranks. " +
				"With tp.degree > 1 each tensor rank's share is sharded over its data group (ranks / tp.degree)."},
		{Name: "zero.overlap_gather", Type: Bool, Apply: Engine, Chapter: 22, Default: "true",
			Constraint: "no effect with zero.stage 0, nor with tp.degree > 1 on device cuda outside a rehearsal (NCCL groups keep the all-gathers in the step)",
			Doc: "ZeRO's parameter all-gathers overlap the next forward: issued after the step, bucket by bucket " +
				"in the order the forward reads them, each layer waiting only for its own buckets (Megatron-LM's " +
				"--overlap-param-gather with its distributed optimizer); false waits for them all in the " +
				"step (the exposed baseline). The records' gather_wait_ms is how long training waited for them."},
		{Name: "pipeline.stages", Type: Int, Min: "1", Max: "64", Apply: Engine, Chapter: 12, Default: "1",
			Constraint: "at most the trial's ranks, and divides them",
			Doc: "Pipeline-parallel stages: the model's layers are cut into this many consecutive parts, one per " +
				"rank; the remaining factor of the ranks is data parallel."},
		{Name: "pipeline.microbatches", Type: Int, Min: "1", Max: "1024", Apply: Engine, Chapter: 13, Default: "1",
			Doc: "Micro-batches per pipeline step. The bubble fraction is (stages-1)/(microbatches+stages-1), so " +
				"more micro-batches fill the pipeline better."},
		{Name: "pipeline.schedule", Type: Enum, Values: []string{"gpipe", "1f1b"}, Apply: Engine, Chapter: 12, Default: "1f1b",
			Doc: "Pipeline schedule: gpipe runs all forwards then all backwards (activations of every micro-batch " +
				"kept); 1f1b interleaves one forward with one backward after a warm-up, holding at most `stages` " +
				"micro-batches of activations."},
		{Name: "pipeline.balance", Type: String, AutoOK: true, Apply: Engine, Chapter: 13, Default: Auto,
			Constraint: "one entry per stage",
			Doc: "How the layers are cut into stages: layers per stage, comma-separated (`5,7`); `params` " +
				"(or auto) splits so that the heaviest stage holds the fewest parameters; `time` measures each " +
				"layer's forward and backward time on the trial's GPUs first and splits by that.",
			parse: parseBalance},

		{Name: "tp.degree", Type: Enum, Values: []string{"1", "2", "4", "8"}, Apply: Engine, Chapter: 12, Default: "1",
			Constraint: "gpt and bert (ResNet-50 is not tensor-parallel); divides the model's attention heads; " +
				"tp.degree x pipeline.stages divides the trial's ranks; a tensor group stays inside a node (the ranks " +
				"per node are a multiple of tp.degree) unless the study sets sweep.allow_tp_across_nodes: true",
			Doc: "Tensor (Megatron-style) parallelism: the transformer blocks' linear layers are split across a group " +
				"of this many ranks (attention heads and the MLP's hidden units column-wise, the output projections " +
				"row-wise, the vocabulary of the embedding and the tied head by rows, padded to a multiple of the degree), " +
				"with two all-reduces per block " +
				"in the forward and two in the backward. Ranks are ordered tensor-fastest, then data, then pipeline " +
				"(rank = t + tp.degree x (d + dp x p)); the data-parallel ranks are the trial's ranks / (tp.degree x " +
				"pipeline.stages). Each rank holds about 1/tp.degree of the weights, gradients, optimizer states and " +
				"of the blocks' activations, at the cost of collectives on the critical path every layer: keep the " +
				"group on NVLink. The data-parallel group averages its gradients in one flat all-reduce after the " +
				"backward (the ddp.* knobs have no effect), or with zero.stage > 0 ZeRO shards each tensor rank's " +
				"share over it in buckets (docs/zero.md). With pipeline.stages each stage's layers are tensor-parallel " +
				"(activations pass between the same tensor rank of neighbouring stages). The engine builds it for gpt and " +
				"bert, without ZeRO under pipeline stages, CUDA graphs, fp8, activation checkpointing, ddp.compression or " +
				"pipeline.balance time; the planner drops those combinations with the reason (docs/tensor-parallel.md)."},
		{Name: "tp.sequence_parallel", Type: Bool, Apply: Engine, Chapter: 12, Default: "false",
			Constraint: "needs tp.degree > 1",
			Doc: "Sequence parallelism (Korthikanti et al. 2022) on top of tp.degree: LayerNorm and dropout run on " +
				"1/tp.degree of the sequence per rank, and each block's all-reduces become an all-gather before and a " +
				"reduce-scatter after the parallel region (the same bytes as the all-reduce in principle; the engine builds " +
				"both from all-reduces for now, up to tp.degree times the traffic), so the activations outside " +
				"the parallel regions are divided by tp.degree too. The LayerNorm weights' gradients are all-reduced " +
				"over the tensor group."},

		// ---- fault injection (tests of the runner only) ----
		{Name: "fault.kind", Type: Enum, Values: []string{"none", "crash", "abort", "term", "exit", "hang", "leak", "slow", "oom", "error", "stall", "overflow"}, Apply: Engine, Default: "none", Chapter: 19, Hidden: true,
			Doc: "Test-only: the fault injected on fault.rank at fault.at_step: the worker does crash (SIGKILL), abort (SIGABRT), " +
				"term (SIGTERM), exit (exit 1), hang (no heartbeats) and leak (host memory until the OOM killer); the engine " +
				"does slow, oom, error and stall (the rank's stream sleeps fault.slow_ms before its first DDP bucket, so its " +
				"peers' collective outlives the deadline: a communication fault) and overflow (precision fp16: an inf in one gradient of " +
				"the rank at that step, which every rank of every group must skip)."},
		{Name: "fault.rank", Type: Int, Min: "0", Max: "65535", Apply: Engine, Default: "0", Chapter: 19, Hidden: true,
			Doc: "Test-only: the rank that injects the fault."},
		{Name: "fault.at_step", Type: Int, Min: "0", Max: "1100000", Apply: Engine, Default: "1", Chapter: 19, Hidden: true,
			Doc: "Test-only: the step (counting warm-up from 0) at which the fault fires."},
		{Name: "fault.slow_ms", Type: Int, Min: "0", Max: "3600000", Apply: Engine, Default: "0", Chapter: 20, Hidden: true,
			Doc: "Test-only: extra milliseconds per step on the faulty rank (fault.kind slow)."},

		// ---- launcher ----
		{Name: "mps", Type: Bool, Apply: Launcher, Chapter: 9, Default: "false",
			Constraint: "needs device cuda",
			Doc: "Runs the trial's processes under the CUDA Multi-Process Service: the runner starts an MPS " +
				"control daemon for the trial's GPUs and stops it afterwards, so several processes share a GPU " +
				"concurrently instead of time-slicing."},
		{Name: "mps.active_thread_pct", Type: Int, Min: "1", Max: "100", AutoOK: true, Apply: Launcher, EnvVar: "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", Chapter: 9, Default: Auto,
			Constraint: "only with mps: true",
			Doc: "Share of a GPU's SMs each MPS client may use (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, set for the " +
				"clients by the runner)."},
		{Name: "profile", Type: Int, Min: "1", Max: "100", OffOK: true, Observe: true, Apply: Launcher, Chapter: 17, Default: Off,
			Constraint: "not swept: it changes what a launch records, not what it measures (left out of trial IDs)",
			Doc: "After each launch's measured steps (never during them), runs this many more steps under libtorch's " +
				"profiler (Kineto on CUDA; CPU operator times on the CPU build) and records per rank where a step's " +
				"time went: GPU busy and idle time, time by kernel category, the top kernels, communication hidden " +
				"behind compute; writes a Chrome/Perfetto trace per rank next to its log. `casestudy run --profile N` " +
				"sets it for every trial. Each launch takes longer by the profiled steps plus the trace (docs/profiling.md)."},
		{Name: "procs_per_gpu", Type: Int, Min: "1", Max: "16", Apply: Launcher, Chapter: 9, Default: "1",
			Doc: "Worker processes (ranks) per GPU; ranks = gpus x procs_per_gpu. More than one usually needs mps " +
				"to run concurrently."},
	}
}

// parseCompression accepts none | fp16 | bf16 | topk | topk:RATIO.
func parseCompression(s string) (string, error) {
	l := strings.ToLower(s)
	switch l {
	case "none", "fp16", "bf16", "topk":
		return l, nil
	}
	if r, ok := strings.CutPrefix(l, "topk:"); ok {
		f, err := strconv.ParseFloat(r, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return "", fmt.Errorf("%q: the top-k ratio must be a number in (0, 1], e.g. topk:0.01", s)
		}
		return "topk:" + strconv.FormatFloat(f, 'g', -1, 64), nil
	}
	msg := fmt.Sprintf("%q is not one of none | fp16 | bf16 | topk | topk:RATIO", s)
	if c := Closest(l, []string{"none", "fp16", "bf16", "topk"}); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	return "", fmt.Errorf("%s", msg)
}

// parseBalance accepts params, time or comma-separated positive layer counts.
func parseBalance(s string) (string, error) {
	if s == BalanceParams || s == BalanceTime {
		return s, nil
	}
	parts := strings.Split(s, ",")
	out := make([]string, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return "", fmt.Errorf("%q: expected params, time or positive layer counts separated by commas, e.g. 5,7", s)
		}
		out[i] = strconv.Itoa(n)
	}
	return strings.Join(out, ","), nil
}

// The pipeline.balance values that name a way to split instead of a split.
const (
	BalanceParams = "params"
	BalanceTime   = "time"
)

// Balance returns the layer counts of a canonical pipeline.balance value (nil
// for auto, params and time).
func Balance(v string) []int {
	if v == "" || v == Auto || v == BalanceParams || v == BalanceTime {
		return nil
	}
	var out []int
	for _, p := range strings.Split(v, ",") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}

// BalanceBy is the engine's pipeline.balance_by for a canonical
// pipeline.balance value: "time" for time, "" (parameter count) otherwise.
func BalanceBy(v string) string {
	if v == BalanceTime {
		return BalanceTime
	}
	return ""
}
