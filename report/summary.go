// Package report turns a run directory into what people read: summary.json
// (versioned), report.md, a self-contained report.html with gonum/plot
// charts, comparisons of two runs, exports (benchfmt, CSV) and history over
// many runs. The numbers come from package stats; this package renders.
package report

import (
	"time"

	"github.com/casestudy/casestudy/checklist"
	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// SchemaVersion is the version of summary.json and baseline files. 2: launch
// values (one per launch, the objective's unit) replace the median samples of
// version 1, whose step-level samples cannot be compared honestly.
const SchemaVersion = 2

// Kinds of summary files.
const (
	KindSummary  = "summary"  // summary.json of a run
	KindBaseline = "baseline" // written by casestudy baseline; same fields
)

// DefaultThreshold is the regression threshold when the study records none.
const DefaultThreshold = 0.05

// NoisyCV is the coefficient of variation of a trial's throughput samples
// above which it is flagged noisy (besides the runner's own flag): the
// runner's default, stats.DefaultNoisyCV.
const NoisyCV = stats.DefaultNoisyCV

// Summary is summary.json: everything the renderers and `compare` need,
// including each trial's launch values so that the comparisons can be
// computed again from a committed baseline file.
type Summary struct {
	Schema    int             `json:"schema"`
	Kind      string          `json:"kind"`
	Study     string          `json:"study"`
	RunID     string          `json:"run_id"`
	Created   time.Time       `json:"created"`
	Objective store.Objective `json:"objective"`
	// Metric is the objective as measured: every trial's Value, comparison,
	// chart and export is in its unit.
	Metric stats.Metric `json:"metric"`
	// Design is how launches were scheduled and the level every interval and
	// verdict is decided at (Design.LookAlpha).
	Design           stats.Design         `json:"design"`
	Confidence       float64              `json:"confidence"`                  // of every per-trial interval: 1 - Design.LookAlpha
	CompareThreshold float64              `json:"compare_threshold,omitempty"` // δ, fraction; 0 = not recorded (verdicts use DefaultThreshold)
	Comparable       Comparable           `json:"comparable"`                  // what compare checks before matching trials
	Measured         *Measured            `json:"measured,omitempty"`          // what was measured (report/measured.go)
	Headline         Headline             `json:"headline"`
	Counts           map[string]int       `json:"counts"` // trials per outcome
	SweptKnobs       []string             `json:"swept_knobs"`
	Strategy         string               `json:"strategy,omitempty"` // the sweep's: grid | one-at-a-time | list | greedy
	Trials           []Trial              `json:"trials"`
	Dropped          []store.DroppedTrial `json:"dropped,omitempty"`  // combinations the planner dropped, each once; not trials, not in Counts
	MFUPeak          *MFUPeak             `json:"mfu_peak,omitempty"` // what every trial's mfu_bf16 is measured against
	// Excluded lists every launch left out of the statistics (tainted by
	// throttling, or without a measurement) and Unsteady every launch whose
	// steps drifted (kept: a launch is never dropped for its value).
	Excluded   []LaunchNote       `json:"excluded_launches,omitempty"`
	Unsteady   []LaunchNote       `json:"unsteady_launches,omitempty"`
	Findings   []checklist.Result `json:"findings"`
	Profiles   *Profiles          `json:"profiles,omitempty"` // kernel mix per trial (knob profile)
	Provenance Provenance         `json:"provenance"`
	Warnings   []string           `json:"warnings,omitempty"`
	// Timeline is where the launches' time went (report/timeline.go); NCCL
	// says whether forced NCCL knobs took effect (report/nccl.go).
	Timeline *TimelineSection `json:"timeline,omitempty"`
	NCCL     []NCCLEvidence   `json:"nccl_evidence,omitempty"`
	// Rehearsal is a rehearsal's section (report/rehearsal.go; kind
	// "rehearsal"): checks, not measurements.
	Rehearsal *RehearsalSection `json:"rehearsal,omitempty"`

	// Predicted is predicted.json beside the run (report/predicted.go): shown
	// in a section of its own, never written to summary.json, so no verdict,
	// baseline, compare or history reads a prediction.
	Predicted *predict.File `json:"-"`

	// ValueBasis is what the launches' samples/s divide by: window (the
	// measured window's wall clock), steps (summed step times: older runs) or
	// mixed.
	ValueBasis string `json:"value_basis,omitempty"`

	sweepValues map[string][]string // the values the study lists per knob, in its order (not in JSON)
	studyText   string              // the study file as run (not in JSON: the manifest has it)
}

// Headline is the one-line answer: the best trial (measure.Best) against the
// baseline. Picking the best of K trials inflates its chance of looking
// faster, so the headline's interval and verdict are corrected for the K
// comparisons with the baseline (Bonferroni: confidence 1 - LookAlpha/K).
type Headline struct {
	Status      string            `json:"status"` // see Headline* constants
	Text        string            `json:"text"`
	Best        string            `json:"best,omitempty"`     // trial ID
	Baseline    string            `json:"baseline,omitempty"` // trial ID
	Metric      string            `json:"metric"`             // the objective the best was chosen by
	Comparison  *stats.Comparison `json:"comparison,omitempty"`
	Comparisons int               `json:"comparisons,omitempty"` // K, what the headline is corrected for
	BestKnobs   map[string]string `json:"best_knobs,omitempty"`  // the knobs that differ from the baseline
	BestValue   *stats.Value      `json:"best_value,omitempty"`
	BaseValue   *stats.Value      `json:"baseline_value,omitempty"`
	Unit        string            `json:"unit"`
	BestIsBase  bool              `json:"best_is_baseline,omitempty"`
}

// Headline statuses.
const (
	HeadlineSpeedup    = "speedup"     // best vs baseline computed
	HeadlineNoBaseline = "no_baseline" // the baseline trial did not finish ok (or is not in the plan)
	HeadlineNoTrials   = "no_ok_trials"
)

// Trial is one row of the report.
type Trial struct {
	ID       string            `json:"id"`
	Label    string            `json:"label"` // the swept knobs that differ from the baseline ("micro_batch=32"), or "baseline"
	Index    int               `json:"index"`
	Knobs    map[string]string `json:"knobs"`
	Changed  []string          `json:"changed"`
	Baseline bool              `json:"baseline,omitempty"`
	Best     bool              `json:"best,omitempty"`
	Outcome  store.Outcome     `json:"outcome"`
	Error    string            `json:"error,omitempty"`
	Command  string            `json:"command"`
	Attempts int               `json:"attempts"`

	// Launches are the clean launches the statistics use (one value each)
	// and those left out, with why.
	Launches meas.Launches `json:"launches"`
	// Value is the trial's one number: the objective (Summary.Metric) as the
	// geometric mean over clean launches, with its interval (none with one
	// launch). The terminal, report, compare, history and exports all show it.
	Value stats.Value `json:"value"`
	// VsBaseline is the trial against the baseline trial: ratio, Welch
	// interval, p and verdict against δ. nil for the baseline itself, trials
	// that did not finish, and runs without a baseline.
	VsBaseline *stats.Comparison `json:"vs_baseline,omitempty"`
	// Median is benchstat's view of the launch values: median with its
	// distribution-free interval (secondary).
	Median     stats.Estimate `json:"median"`
	Throughput stats.Value    `json:"throughput"` // samples/s, the same estimator over the same launches
	TokensPerS float64        `json:"tokens_per_s,omitempty"`
	StepMS     StepTime       `json:"step_ms"`
	CV         *float64       `json:"cv"`        // of the objective across launches (= Value.CV); null below two launches
	StepCV     float64        `json:"step_cv"`   // across steps (runner's summary)
	RepeatCV   float64        `json:"repeat_cv"` // across repeats (runner's summary)
	Noisy      bool           `json:"noisy"`
	Throttled  bool           `json:"throttled,omitempty"`

	MFU          float64    `json:"mfu"`              // against the peak at the trial's own precision (the engine's)
	MFUBF16      float64    `json:"mfu_bf16"`         // against Summary.MFUPeak, the same for every trial; 0 when unknown
	TFLOPS       float64    `json:"tflops"`           // achieved model TFLOP/s per GPU
	MemPeakBytes int64      `json:"mem_peak_bytes"`   // peak allocated: leaves out a CUDA graph's pool (see Memory)
	Memory       *Memory    `json:"memory,omitempty"` // what the trial holds, per rank (report/memory.go)
	FinalLoss    float64    `json:"final_loss"`
	Breakdown    *Breakdown `json:"breakdown,omitempty"`
	// LaunchDetail is every launch as recorded: value, steps, SM clock and
	// power over the window (report/launches.go).
	LaunchDetail []LaunchDetail `json:"launch_detail,omitempty"`
	Warnings     []string       `json:"warnings,omitempty"`

	// Power is the power limiter's cost inside the measured windows (clock
	// deficit, power-cap share); nil on the CPU or without counters.
	Power *Power `json:"power,omitempty"`

	// OptimStateBytes: the largest rank's optimizer states (ZeRO: its shard's).
	OptimStateBytes int64 `json:"optimizer_state_bytes,omitempty"`

	// Layout: a tensor-parallel or ZeRO trial's tensor x data x pipeline
	// ranks and ZeRO stage (report/layout.go); nil otherwise.
	Layout *Layout `json:"layout,omitempty"`
}

// LaunchNote is one launch the report lists: left out of the statistics, or
// kept but not steady.
type LaunchNote struct {
	Trial  string `json:"trial"`
	Repeat int    `json:"repeat"`
	Reason string `json:"reason"`
}

// Comparable are the facts two runs must share for compare to match their
// trials: the same model, measurement and hardware.
type Comparable struct {
	Model    string `json:"model"`    // family/preset (layers, hidden)
	Workload string `json:"workload"` // device, steps, warm-up steps
	GPU      string `json:"gpu"`      // GPU model(s), "" on CPU
	Metric   string `json:"metric"`   // the objective
	// The run's scale, the study's workload.gpus, nodes, ranks, threads and
	// world_of_one: not knobs, so trial IDs match across them (scaleDiffers).
	// nil: not recorded (files written before casestudy recorded them).
	GPUs       *int  `json:"gpus,omitempty"`
	Nodes      *int  `json:"nodes,omitempty"`
	Ranks      *int  `json:"ranks,omitempty"`
	Threads    *int  `json:"threads,omitempty"`
	WorldOfOne *bool `json:"world_of_one,omitempty"`
}

// StepTime is the descriptive spread of step time in ms.
type StepTime struct {
	Median float64 `json:"median"`
	P10    float64 `json:"p10"`
	P90    float64 `json:"p90"`
}

// Breakdown splits the median step into parts (ms). Other is the step minus
// the named parts, never below zero.
type Breakdown struct {
	ForwardMS     float64 `json:"forward_ms"`
	BackwardMS    float64 `json:"backward_ms"`
	OptimizerMS   float64 `json:"optimizer_ms"`
	ExposedCommMS float64 `json:"exposed_comm_ms"`
	BubbleMS      float64 `json:"bubble_ms"`
	OtherMS       float64 `json:"other_ms"`
	// TPCommMS: of ExposedCommMS, the tensor group's collectives (tensor
	// parallelism, docs/tensor-parallel.md); 0 and absent without it.
	TPCommMS float64 `json:"tp_comm_ms,omitempty"`
	// Split says how the step is divided (report/breakdown.go): "" by the
	// engine's timers, "profile" a replayed graph by its kernel profile
	// (Kernels and IdleMS), "none" a replayed graph without one (Note).
	Split   string       `json:"split,omitempty"`
	Kernels []KernelPart `json:"kernels,omitempty"`
	IdleMS  float64      `json:"idle_ms,omitempty"`
	Note    string       `json:"note,omitempty"`
}

// Provenance says where and with what the numbers were measured.
type Provenance struct {
	RunDir      string   `json:"run_dir,omitempty"`
	Command     string   `json:"command"`
	Casestudy   string   `json:"casestudy"` // version (commit)
	StudyPath   string   `json:"study_path"`
	StudySHA256 string   `json:"study_sha256"`
	Host        string   `json:"host"`
	CPU         string   `json:"cpu"`
	GPUs        []string `json:"gpus"` // "0: NVIDIA H200 (141 GiB)"
	GPUUUIDs    []string `json:"gpu_uuids,omitempty"`
	Driver      string   `json:"driver,omitempty"`
	CUDADriver  string   `json:"cuda_driver,omitempty"`
	CUDA        string   `json:"cuda,omitempty"` // torch's CUDA
	NCCL        string   `json:"nccl,omitempty"`
	Torch       string   `json:"torch,omitempty"`
	CuDNN       string   `json:"cudnn,omitempty"`
	// CuDNNLoaded and Libraries are what the ranks' processes loaded (their
	// cs_info; rankLibraries): the cuDNN version(s) and "name path" of each
	// copy of cuDNN, NCCL, cuBLAS, the CUDA runtime and torch.
	CuDNNLoaded []string          `json:"cudnn_loaded,omitempty"`
	Libraries   []string          `json:"loaded_libraries,omitempty"`
	Topology    string            `json:"topology,omitempty"`
	Nodes       int               `json:"nodes"`
	Model       map[string]any    `json:"model,omitempty"`
	Workload    map[string]any    `json:"workload,omitempty"`
	Env         map[string]string `json:"env,omitempty"`

	// RankGPUs is each GPU the ranks reported running on, with its ranks
	// (report/facts_dp.go).
	RankGPUs []string `json:"rank_gpus,omitempty"`
	// BNBuffers states the BatchNorm-buffer policy when ResNet trials ran
	// data parallel ("" otherwise).
	BNBuffers string `json:"bn_buffers,omitempty"`
}

// Unmeasured: planned but never measured (not_run: the run stopped before
// it; interrupted in it).
func (t *Trial) Unmeasured() bool { return t.Outcome == NotRun || t.Outcome == store.Interrupted }

// OK reports whether the trial finished with a measurement.
func (t *Trial) OK() bool { return t.Outcome == store.OK && t.Value.N > 0 }
