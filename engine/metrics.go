package engine

// StepMetrics is what cs_step returns for one training step on one rank.
// Times are milliseconds measured with CUDA events on GPUs, the host clock on CPU.
type StepMetrics struct {
	Step        int     `json:"step"`
	Loss        float64 `json:"loss"`
	GradNorm    float64 `json:"grad_norm"`
	StepMS      float64 `json:"step_ms"`
	ForwardMS   float64 `json:"forward_ms"`   // 0 when replaying a graph
	BackwardMS  float64 `json:"backward_ms"`  // 0 when replaying a graph
	OptimizerMS float64 `json:"optimizer_ms"` // 0 when replaying a graph
	TailMS      float64 `json:"tail_ms"`      // the reducer's finalize (wait, divide); docs/predict.md
	// InterfereGBps is the κ calibration's load (CASESTUDY_INTERFERE,
	// docs/predict.md): GB/s read + written beside the backward pass; 0 without.
	InterfereGBps float64 `json:"interfere_gbps,omitempty"`
	// InterfereTimeouts counts the load's kernels that outlived their backward
	// pass and stopped at their deadline (2 s), so far in the launch: the
	// backward waited for the whole device and the calibration is void.
	InterfereTimeouts int64           `json:"interfere_timeouts,omitempty"`
	CommMS            float64         `json:"comm_ms"`         // all collectives of the step (comm stream)
	ExposedCommMS     float64         `json:"exposed_comm_ms"` // communication not hidden behind compute
	BubbleMS          float64         `json:"bubble_ms"`       // pipeline idle time
	Samples           int             `json:"samples"`         // samples this rank processed in the step
	Tokens            int             `json:"tokens"`          // tokens this rank processed (0 for images)
	SamplesPerS       float64         `json:"samples_per_s"`
	TokensPerS        float64         `json:"tokens_per_s"`
	TFLOPS            float64         `json:"tflops"` // achieved, from model FLOPs
	MFU               float64         `json:"mfu"`    // TFLOPS / peak; 0 when the peak is unknown
	MemPeakBytes      int64           `json:"mem_peak_bytes"`
	MemReservedBytes  int64           `json:"mem_reserved_bytes"`
	Skipped           bool            `json:"skipped"`    // fp16: step skipped for inf/nan gradients
	LossScale         float64         `json:"loss_scale"` // fp16 dynamic loss scale; 0 otherwise
	CommBytes         int64           `json:"comm_bytes"`
	Collectives       int             `json:"collectives"`
	Buckets           []BucketMetrics `json:"buckets,omitempty"`
	Stages            []StageMetrics  `json:"stages,omitempty"`
	OptimStateBytes   int64           `json:"optimizer_state_bytes,omitempty"` // this rank's optimizer states (ZeRO: its shard's)
	// GatherWaitMS (ZeRO) is how long the rank waited for the parameters'
	// all-gathers that this record's buckets list: with zero.overlap_gather
	// the forward's waits for the previous step's (the first step lists
	// none), without it the step's wait for its own. Also in ExposedCommMS.
	GatherWaitMS float64 `json:"gather_wait_ms,omitempty"`
	// GradBucketPeakBytes (ZeRO-2) is the most bytes of full (padded fp32)
	// gradient bucket buffers the rank held at once in the step: a bucket's
	// buffer lives from its gradients' copy until its reduce-scatter has read
	// it, so with collectives that keep up it is about one bucket, not the
	// model's gradients (docs/zero.md). Absent without ZeRO-2.
	GradBucketPeakBytes int64 `json:"grad_bucket_peak_bytes,omitempty"`
	// AccumGradBytes (data parallel with grad_accum > 1) is the most bytes of
	// gradient storage the rank held after a micro-batch's backward but the
	// last, before the next forward: the parameters' .grad() storages and
	// what the reducer keeps beside them (ZeRO-2: its shard and any bucket
	// buffer a collective still holds), each storage counted once. A count of
	// the engine's references, not of an allocator: DDP and ZeRO-1 hold every
	// gradient there, ZeRO-2 its shard (docs/zero.md). Absent otherwise.
	AccumGradBytes int64 `json:"accum_grad_bytes,omitempty"`

	// TPCommMS is a tensor-parallel rank's time in its tensor group's
	// collectives (the activations' all-reduces, all-gathers and
	// reduce-scatters, the gradient norm's all-reduce), timed on the compute
	// stream. They are synchronous, so all of it is exposed: CommMS and
	// ExposedCommMS count it (and the data group's gradient average), and
	// ForwardMS, BackwardMS and OptimizerMS leave it out
	// (docs/tensor-parallel.md). Under a pipeline the stage's ForwardMS and
	// BackwardMS are its busy time with them inside, so CommMS counts them and
	// ExposedCommMS does not. TPCollectives and TPCommBytes count them.
	// Absent without tp.
	TPCommMS      float64 `json:"tp_comm_ms,omitempty"`
	TPCollectives int     `json:"tp_collectives,omitempty"`
	TPCommBytes   int64   `json:"tp_comm_bytes,omitempty"`

	// InterfereRanks is the stretch calibration's group (CASESTUDY_INTERFERE=
	// gloo:N, docs/predict.md): N on every step of such a launch, whose loaded
	// steps (InterfereGBps > 0) alternate with clean ones; 0 otherwise.
	InterfereRanks int `json:"interfere_ranks,omitempty"`
}

// BucketMetrics describes one gradient bucket's all-reduce in a step.
type BucketMetrics struct {
	Op       string  `json:"op,omitempty"` // all_reduce | all_gather (topk, ZeRO) | reduce_scatter (ZeRO-2)
	Bytes    int64   `json:"bytes"`
	MS       float64 `json:"ms"` // this rank's time on its communication stream, waiting for late peers included
	AlgBWGBs float64 `json:"algbw_gbs"`
	BusBWGBs float64 `json:"busbw_gbs"`
	// The runner's split of the bucket's time over the ranks of the world
	// (runner: splitBucketSkew): TransferMS is the least any rank took (the
	// last rank to arrive waits for nobody, so its time is the transfer),
	// SkewMS the most less the least (how long the early ranks waited for the
	// last: a straggler metric of its own), TransferBusBWGBs nccl-tests' bus
	// bandwidth of TransferMS. Zero on one rank or when not split.
	TransferMS       float64 `json:"transfer_ms,omitempty"`
	SkewMS           float64 `json:"skew_ms,omitempty"`
	TransferBusBWGBs float64 `json:"transfer_busbw_gbs,omitempty"`
	// ReadyMS is when the bucket's last gradient landed, in ms since the
	// step's backward began (the multi-GPU prediction's input, docs/predict.md);
	// nil in runs from before it was recorded, < 0 with ddp.overlap false.
	ReadyMS *float64 `json:"ready_ms,omitempty"`
}

// BusBW is the bucket's bus bandwidth without the ranks' arrival skew where
// the runner split it (TransferBusBWGBs), else the rank's own (BusBWGBs).
func (b BucketMetrics) BusBW() float64 {
	if b.TransferBusBWGBs > 0 {
		return b.TransferBusBWGBs
	}
	return b.BusBWGBs
}

// StageMetrics describes this rank's pipeline stage in a step.
type StageMetrics struct {
	Stage          int     `json:"stage"`
	BusyMS         float64 `json:"busy_ms"`
	IdleMS         float64 `json:"idle_ms"`
	BubbleFraction float64 `json:"bubble_fraction"`
	TheoryBubble   float64 `json:"theory_bubble"`
	ActPeakBytes   int64   `json:"act_peak_bytes"`
	P2PBytes       int64   `json:"p2p_bytes"`
	P2PMS          float64 `json:"p2p_ms"`
}

// Description is what cs_describe returns: a model's static facts.
type Description struct {
	Family          string         `json:"family"`
	Preset          string         `json:"preset"`
	Params          int64          `json:"params"`
	FLOPsPerSample  float64        `json:"flops_per_sample"` // training FLOPs (fwd+bwd)
	TokensPerSample int            `json:"tokens_per_sample"`
	Shapes          map[string]int `json:"shapes"` // layers, hidden, heads, seq_len, vocab, image_size ...
}

// Info is what cs_info returns for a created engine.
type Info struct {
	Description
	Device        string  `json:"device"`
	DeviceName    string  `json:"device_name"`
	Precision     string  `json:"precision"`
	Rank          int     `json:"rank"`
	WorldSize     int     `json:"world_size"`
	PeakTFLOPS    float64 `json:"peak_tflops"`
	MemAfterSetup int64   `json:"mem_after_setup_bytes"`
	Backend       string  `json:"backend"` // nccl | gloo | none
	// What the engine chose to run: the optimizer implementation (e.g.
	// adamw-fused) and attention (sdpa | math).
	Optimizer string `json:"optimizer,omitempty"`
	Attention string `json:"attention,omitempty"`
	// Kernels lists the engine's own CUDA kernels in use ("ce,ln", "none";
	// engine/native/src/kernels.h, CASESTUDY_KERNELS).
	Kernels string `json:"kernels,omitempty"`
	// CuDNN is how cuDNN picks convolution algorithms, for families with
	// convolutions (resnet50): "benchmark, limit 10" (autotuning over at most
	// 10 candidates, the default), "benchmark, every algorithm" or "heuristics"
	// (CASESTUDY_CUDNN_BENCHMARK_LIMIT; engine/native/src/cudnn_tuning.h).
	CuDNN string `json:"cudnn,omitempty"`
	// Libraries are the copies of cuDNN, NCCL, cuBLAS, the CUDA runtime and
	// torch the rank's process loaded, by path, and CuDNNRuntime the loaded
	// cuDNN's version (on a GPU): the loader takes one copy of each per
	// process, and a cuDNN other than torch's runs every attention and
	// convolution kernel (the engine says so on stderr).
	Libraries    map[string]string `json:"libraries,omitempty"`
	CuDNNRuntime string            `json:"cudnn_runtime,omitempty"`
	// Pipeline is this rank's place in a pipeline (pipeline.stages > 1).
	Pipeline *PipelineInfo `json:"pipeline,omitempty"`
	// Threads is the engine's intra-op thread count; AffinityCPUs the CPUs
	// the rank's affinity mask allows (what a cpuset or Slurm's --cpu-bind
	// left it), which sizes Threads when the config leaves it 0.
	Threads      int `json:"threads,omitempty"`
	AffinityCPUs int `json:"affinity_cpus,omitempty"`
	// GPUUUID and PCIBusID identify the GPU the rank ran on, as the rank
	// itself saw it (nvidia-smi's spelling); empty on the CPU.
	GPUUUID  string `json:"gpu_uuid,omitempty"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// DataVersion is the synthetic data generator's version: 2 draws every
	// value from (seed, step, row of the global batch), so a data-parallel
	// rank generates only its rows; absent (0) is the generator before it,
	// whose losses differ (docs/data-parallel.md "Input").
	DataVersion int `json:"data_version,omitempty"`
	// OptimStateBytes is this rank's optimizer states; Zero its ZeRO shard
	// (zero.stage > 0).
	OptimStateBytes int64     `json:"optimizer_state_bytes"`
	Zero            *ZeroInfo `json:"zero,omitempty"`
	// InitPhases is where cs_create spent its time, in order: device_init,
	// model_build, optimizer, data_setup, comm_init (docs/engine.md). They add
	// up to the engine's part of Create.
	InitPhases []InitPhase `json:"init_phases,omitempty"`
}

// InitPhase is one phase of cs_create and its wall-clock time.
type InitPhase struct {
	Name string  `json:"name"`
	MS   float64 `json:"ms"`
}

// PipelineInfo is cs_info's pipeline object: the stage, the split and how it
// was found.
type PipelineInfo struct {
	Stages     int       `json:"stages"`
	Stage      int       `json:"stage"`
	Schedule   string    `json:"schedule"`
	Balance    []int     `json:"balance"`    // layers per stage
	BalanceBy  string    `json:"balance_by"` // manual | params | time
	LayerMS    []float64 `json:"layer_ms"`   // measured per-layer times (balance_by time)
	FirstLayer int       `json:"first_layer"`
	LastLayer  int       `json:"last_layer"`
}

// ZeroInfo is cs_info's zero object: the flat buffer and this rank's shard of it.
type ZeroInfo struct {
	Stage      int   `json:"stage"`
	Buckets    int   `json:"buckets"`
	Tensors    int   `json:"tensors"`     // trainable parameter tensors
	FlatNumel  int64 `json:"flat_numel"`  // every parameter, buckets padded to a multiple of the ranks
	OwnedNumel int64 `json:"owned_numel"` // the parameters this rank steps
	StateBytes int64 `json:"state_bytes"`
	// Ranks the shards are spread over and their group: "world" (data
	// parallel), "data" (tensor parallelism's data group, ranks / tp.degree).
	// Zero and "" in records from before they were recorded.
	Ranks int    `json:"ranks,omitempty"`
	Group string `json:"group,omitempty"`
	// OverlapGather: the all-gathers overlap the next forward
	// (zero.overlap_gather); WaitPoints: the layers the forward waits before
	// (each the first to read a bucket). false and 0 without overlap, and in
	// records from before they were recorded.
	OverlapGather bool `json:"overlap_gather,omitempty"`
	WaitPoints    int  `json:"wait_points,omitempty"`
}

// BuildInfo is what cs_build_info returns.
type BuildInfo struct {
	ABI   int    `json:"abi"`
	Torch string `json:"torch"`
	CUDA  string `json:"cuda"`
	NCCL  string `json:"nccl"`
	CuDNN string `json:"cudnn"`
	// CuDNNRuntime is the version of the cuDNN loaded in the probing process
	// ("" when none was loaded yet); Libraries the paths the loader opened for
	// cuDNN, NCCL, cuBLAS, the CUDA runtime and torch (engine/native/src/loaded_libs.h).
	CuDNNRuntime  string            `json:"cudnn_runtime,omitempty"`
	Libraries     map[string]string `json:"libraries,omitempty"`
	Gloo          bool              `json:"gloo"`
	CUDAAvailable bool              `json:"cuda_available"`
	DeviceCount   int               `json:"device_count"`
}

// Checksum is what cs_param_checksum returns.
type Checksum struct {
	Sum  float64 `json:"sum"`
	Hash string  `json:"hash"`
}

// FamilyPresets is one model family of the library and its presets.
type FamilyPresets struct {
	Family  string   `json:"family"`
	Presets []string `json:"presets"`
}
