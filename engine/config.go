// Package engine is the Go side of the native training engine: the configuration
// and metric types that cross the C ABI as JSON, and the binding that loads
// libcasestudy_engine.so at run time.
package engine

// Config is the JSON document passed to cs_create and cs_describe. Field names are
// the contract with engine/native/src/config.cpp; docs/engine.md documents them.
type Config struct {
	Family string `json:"family"`           // gpt | bert | resnet50
	Preset string `json:"preset"`           // e.g. tiny, 124m, base, large, 50
	Layers int    `json:"layers,omitempty"` // 0: the preset's; overrides for experiments
	Hidden int    `json:"hidden,omitempty"` // 0: the preset's

	MicroBatch int `json:"micro_batch"`          // samples per micro-batch per rank
	SeqLen     int `json:"seq_len,omitempty"`    // tokens per sample (gpt, bert)
	ImageSize  int `json:"image_size,omitempty"` // pixels per side (resnet50)

	Device      string `json:"device"`       // cpu | cuda
	DeviceIndex int    `json:"device_index"` // CUDA ordinal within CUDA_VISIBLE_DEVICES
	Threads     int    `json:"threads"`      // intra-op CPU threads; 0: all cores

	Precision               string `json:"precision"` // fp32 | tf32 | bf16 | fp16 | fp8
	Graphs                  bool   `json:"graphs"`    // capture and replay the whole step
	GradAccum               int    `json:"grad_accum"`
	ActivationCheckpointing bool   `json:"activation_checkpointing"`
	ChannelsLast            bool   `json:"channels_last"`

	Seed         int64   `json:"seed"`
	LearningRate float64 `json:"lr,omitempty"`          // 0: the family's default
	PeakTFLOPS   float64 `json:"peak_tflops,omitempty"` // for MFU; 0: engine's table by device name

	Dist     DistConfig     `json:"dist"`
	DDP      DDPConfig      `json:"ddp"`
	Pipeline PipelineConfig `json:"pipeline"`
	Zero     ZeroConfig     `json:"zero"`
	TP       *TPConfig      `json:"tp,omitempty"`     // tensor parallelism; nil: none
	FP8      *FP8Config     `json:"fp8,omitempty"`    // precision fp8 only
	ResNet   *ResNetConfig  `json:"resnet,omitempty"` // resnet50 options; nil: the defaults
	Fault    FaultConfig    `json:"fault"`
}

// DistConfig places this process in the trial's communicator.
type DistConfig struct {
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`        // 1: no communicator unless Backend is set
	Backend   string `json:"backend,omitempty"` // nccl | gloo | gloo-staged; "": by device (world_size 1: none)
	// Gloo's store: with StoreToken, the runner's rendezvous at StoreAddr:StorePort
	// (authenticated by the trial's token); without, a c10d TCPStore rank 0 serves
	// there (engine tests and tools only: it listens on every interface unchecked).
	StoreAddr  string `json:"store_addr,omitempty"`
	StorePort  int    `json:"store_port,omitempty"`
	StoreToken string `json:"store_token,omitempty"`
	NCCLID     string `json:"nccl_id,omitempty"`    // hex unique id from rank 0 (nccl)
	TimeoutMS  int    `json:"timeout_ms,omitempty"` // collective deadline; 0: engine default
}

// BackendStaged is the host-staged backend: Gloo on host copies of the
// tensors (engine/native/src/comm_staged.cpp), so that CUDA ranks can share a
// GPU (a rehearsal, docs/rehearsal.md); on CPU ranks it runs the staging code
// with CPU tensors. Backend gloo with CUDA tensors is staged too.
const BackendStaged = "gloo-staged"

// DDPConfig is the gradient reducer's configuration (PyTorch DDP semantics).
type DDPConfig struct {
	BucketMB      float64 `json:"bucket_mb"`
	FirstBucketMB float64 `json:"first_bucket_mb"`
	Overlap       bool    `json:"overlap"`
	Compression   string  `json:"compression"` // none | fp16 | bf16 | topk
	TopKRatio     float64 `json:"topk_ratio,omitempty"`
}

// PipelineConfig splits the model into stages (pipeline parallelism).
type PipelineConfig struct {
	Stages       int    `json:"stages"`
	Microbatches int    `json:"microbatches"`
	Schedule     string `json:"schedule"`             // gpipe | 1f1b
	Balance      []int  `json:"balance,omitempty"`    // layers per stage; empty: split by BalanceBy
	BalanceBy    string `json:"balance_by,omitempty"` // params (default) | time: measured per-layer time
}

// ZeroConfig shards optimizer states (stage 1) and gradients (stage 2) across
// the data-parallel ranks (engine/native/src/zero.h; docs/zero.md).
type ZeroConfig struct {
	Stage int `json:"stage"` // 0: none (DDP) | 1 | 2
	// OverlapGather: the step's parameter all-gathers overlap the next
	// forward, each layer waiting for its buckets (nil: the engine's default,
	// true); false waits for them in the step (the exposed baseline).
	OverlapGather *bool `json:"overlap_gather,omitempty"`
}

// TPConfig splits GPT's and BERT's layers across a tensor-parallel group (ResNet is refused)
// (Megatron-LM; engine/native/src/tp.h; docs/tensor-parallel.md). Ranks are
// ordered tensor-fastest, then data, then pipeline: rank = t + degree*(d + dp*p).
type TPConfig struct {
	Degree           int  `json:"degree"`            // ranks per tensor group (1: none)
	SequenceParallel bool `json:"sequence_parallel"` // LayerNorm and dropout on sequence shards
}

// FP8Config is precision fp8's recipe (engine/native/src/fp8_linear.h): the
// linear layers' operands scaled from their amax per tensor or per row, and
// the gradients in e5m2 or e4m3. "": the engine's default (tensor, e5m2).
type FP8Config struct {
	Scaling string `json:"scaling,omitempty"` // tensor | row
	Grad    string `json:"grad,omitempty"`    // e5m2 | e4m3
}

// ResNetConfig holds resnet50's options. Fusion "cudnn" folds the bottleneck
// blocks' batch norms into cuDNN's fused convolutions (ConvBNfprop; needs
// precision fp16, channels_last, device cuda and an engine built with cuDNN's
// backend headers: docs/resnet-fusion.md); "" or "off": the engine's kernels.
type ResNetConfig struct {
	Fusion string `json:"fusion,omitempty"` // off | cudnn
}

// FaultConfig injects a fault for tests of the runner's failure handling.
type FaultConfig struct {
	Kind   string `json:"kind,omitempty"` // crash | abort | hang | slow | oom | error | stall
	Rank   int    `json:"rank"`
	AtStep int    `json:"at_step"`
	SlowMS int    `json:"slow_ms,omitempty"` // slow: per step; stall: the stall's length
	Bucket int    `json:"bucket,omitempty"`  // stall: the DDP bucket it comes before (0: the first)
}
