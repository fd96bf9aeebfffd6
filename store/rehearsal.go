package store

import "fmt"

// RehearsalNote is what every rehearsal says of its numbers.
const RehearsalNote = "rehearsal, not a measurement"

// Rehearsal marks a run as a rehearsal (casestudy run --rehearse,
// docs/rehearsal.md): every trial ran its real ranks and layout as processes
// sharing the GPUs present (or CPU ranks), through the host-staged backend.
// Its timings measure nothing: compare, baseline and history refuse or skip
// such a run, and its report has a Rehearsal section only.
type Rehearsal struct {
	Note    string   `json:"note"`    // RehearsalNote
	Backend string   `json:"backend"` // the backend the ranks used: gloo-staged
	Device  string   `json:"device"`  // cuda | cpu
	GPUs    []string `json:"gpus,omitempty"`
	// GPUMemoryBytes is the capacity of one GPU of this machine, what each rank
	// of the real run would have to itself (0 on cpu or unknown).
	GPUMemoryBytes int64  `json:"gpu_memory_bytes,omitempty"`
	GPUName        string `json:"gpu_name,omitempty"`
}

// RehearsalTrial is what the rehearsal of one trial found besides its launch
// (TrialRecord.Repeats holds the launch itself).
type RehearsalTrial struct {
	Ranks       int `json:"ranks"`
	DataPar     int `json:"data_parallel"`
	Stages      int `json:"stages"`
	MicroBatch  int `json:"micro_batch"`
	RanksPerGPU int `json:"ranks_per_gpu,omitempty"` // the most ranks one GPU held (0 on cpu)
	// Devices is each rank's CUDA_VISIBLE_DEVICES entry (round-robin).
	Devices []string `json:"devices,omitempty"`
	// EstimateBytes is the plan-time estimate of one rank's memory.
	EstimateBytes int64 `json:"estimate_bytes,omitempty"`
	// ProcessBytes is what the plan counted a rank's process to hold outside
	// the allocator (CUDA context, libraries, communicators), part of
	// EstimateBytes; 0 in records written before it was recorded, whose plans
	// counted LegacyProcessBytes.
	ProcessBytes int64 `json:"process_bytes,omitempty"`
	// EstimateModel is EstimateBytes split as the plan computed it (runner.
	// RankEstimateModel): a static part and a per-sample part, linear in the
	// micro-batch (EstimateBytes = Static + PerSample x MicroBatch +
	// ProcessBytes). nil in records written before 2026-12-07's mbfit change:
	// the report then says the largest micro-batch is unknown.
	EstimateModel *RankMemoryModel `json:"estimate_model,omitempty"`
	// TensorPar is the tensor-parallel degree (0: none): ranks are
	// tensor-fastest, rank = t + TensorPar*(d + DataPar*p).
	TensorPar int `json:"tensor_parallel,omitempty"`
	// NotApplicable lists knobs a rehearsal cannot exercise (nccl.*: the ranks
	// talk Gloo), knob -> value, each also in Notes.
	NotApplicable map[string]string `json:"not_applicable,omitempty"`
	Notes         []string          `json:"notes,omitempty"`
	// Reference is one rank training the same global batch, for the losses.
	Reference *RehearsalLaunch `json:"reference,omitempty"`
	// NoiseReference is the same one-rank run in fp32 when the trial's
	// precision is not: its distance to Reference is the precision's noise,
	// the tolerance of the trial's losses.
	NoiseReference *RehearsalLaunch `json:"noise_reference,omitempty"`
	// TwinFP32 is the trial itself (its ranks and layout) in fp32 when it is
	// tensor-parallel in 16-bit: its losses (the mean over ranks per step)
	// against NoiseReference check the layout to fp32's 1e-5, which a 16-bit
	// comparison cannot (the tensor-parallel partial sums round in 16-bit
	// where one rank's full sums do, a noise the one-rank runs do not show).
	TwinFP32 *RehearsalLaunch `json:"twin_fp32,omitempty"`
	// TwinReference is one rank in fp32 training the twin's global batch
	// when the twin ran at a smaller micro-batch than the trial (the trial's
	// did not fit in fp32); the twin is then judged against it, not against
	// NoiseReference.
	TwinReference *RehearsalLaunch `json:"twin_reference,omitempty"`
	// Faults are launches with a fault injected in one rank, each classified
	// as the runner classifies it on a cluster.
	Faults []RehearsalFault `json:"faults,omitempty"`
}

// RankMemoryModel is the plan's estimate of one rank's allocator peak as a
// line in the per-rank micro-batch: what does not grow with it (model
// states, gradient buckets, accumulation and compression buffers) and what
// one sample adds (its activations times the micro-batches a stage holds).
// The process's memory outside the allocator is RehearsalTrial.ProcessBytes.
type RankMemoryModel struct {
	StaticBytes    int64   `json:"static_bytes"`
	PerSampleBytes float64 `json:"per_sample_bytes"`
}

// At is the model's allocator peak at micro-batch mb.
func (m RankMemoryModel) At(mb int) int64 {
	return m.StaticBytes + int64(m.PerSampleBytes*float64(mb))
}

// RehearsalLaunch is a launch of the rehearsal beside the trial's own.
type RehearsalLaunch struct {
	Outcome    Outcome   `json:"outcome"`
	Error      string    `json:"error,omitempty"`
	MicroBatch int       `json:"micro_batch"`
	GradAccum  int       `json:"grad_accum"`
	Losses     []float64 `json:"losses,omitempty"` // measured steps, in order
	// Steps: the step number of each loss, so that the report compares the
	// same steps (absent in records before 2026-12-06's second session).
	Steps []int `json:"steps,omitempty"`
}

// RehearsalFault is one injected fault and what the runner made of it.
type RehearsalFault struct {
	Kind       string  `json:"kind"` // the engine's fault.kind (crash, hang, ...)
	Rank       int     `json:"rank"`
	AtStep     int     `json:"at_step"`
	Outcome    Outcome `json:"outcome"`
	FailedRank int     `json:"failed_rank"`
	Error      string  `json:"error,omitempty"`
	// Expected is the outcome a cluster run would record; Classified says
	// whether the rehearsal recorded it and named the rank.
	Expected   Outcome `json:"expected"`
	Classified bool    `json:"classified"`
}

// IsRehearsal says whether the run is a rehearsal.
func (m *Manifest) IsRehearsal() bool { return m != nil && m.Rehearsal != nil }

// RefuseRehearsal is the error of a command that takes measured runs only
// (commands: "compare and export", "baseline") when given the rehearsal in dir.
func RefuseRehearsal(dir, commands string) error {
	return fmt.Errorf("%s is a rehearsal (%s): its timings come from ranks sharing a GPU through host-staged "+
		"collectives, and %s take measured runs only; run the study without --rehearse on the real machine", dir, RehearsalNote, commands)
}

// MeanLosses is the loss of the global batch per measured step: the mean over
// ranks (every pipeline stage and tensor rank reports its replica's loss),
// over the steps every rank measured.
func MeanLosses(ranks []RankRecord) []float64 {
	if len(ranks) == 0 {
		return nil
	}
	n := len(ranks[0].Steps)
	for _, r := range ranks {
		n = min(n, len(r.Steps))
	}
	out := make([]float64, n)
	for _, r := range ranks {
		for i := 0; i < n; i++ {
			out[i] += r.Steps[i].Loss / float64(len(ranks))
		}
	}
	return out
}

// LegacyProcessBytes is what a rehearsal's plan counted a rank's process to
// hold outside the allocator before RehearsalTrial.ProcessBytes was recorded.
const LegacyProcessBytes = 512 << 20

// RehearsalFitHeadroom is the share of one device's memory a rehearsal's
// plan lets its ranks' estimates fill (runner.CheckRehearsalFit): the rest
// covers the allocator's reserve above its peak and the estimate's error.
// The report's largest micro-batch holds the calibrated model to it too.
const RehearsalFitHeadroom = 0.9
