// Package report turns a run directory into what people read: summary.json
// (versioned), report.md, a self-contained report.html with gonum/plot
// charts, comparisons of two runs, exports (benchfmt, CSV) and history over
// many runs. The numbers come from package stats; this package renders.
package report

import (
	"time"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// SchemaVersion is the version of summary.json and baseline files.
const SchemaVersion = 1

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
// including each trial's raw samples so that significance can be computed
// again from a committed baseline file.
type Summary struct {
	Schema           int                  `json:"schema"`
	Kind             string               `json:"kind"`
	Study            string               `json:"study"`
	RunID            string               `json:"run_id"`
	Created          time.Time            `json:"created"`
	Objective        store.Objective      `json:"objective"`
	CompareThreshold float64              `json:"compare_threshold,omitempty"` // fraction; 0 = not recorded
	Headline         Headline             `json:"headline"`
	Counts           map[string]int       `json:"counts"` // trials per outcome
	SweptKnobs       []string             `json:"swept_knobs"`
	Trials           []Trial              `json:"trials"`
	Dropped          []store.DroppedTrial `json:"dropped,omitempty"`
	Findings         []checklist.Result   `json:"findings"`
	Provenance       Provenance           `json:"provenance"`
	Warnings         []string             `json:"warnings,omitempty"`
	// Timeline is where the launches' time went (report/timeline.go); NCCL
	// says whether forced NCCL knobs took effect (report/nccl.go).
	Timeline *TimelineSection `json:"timeline,omitempty"`
	NCCL     []NCCLEvidence   `json:"nccl_evidence,omitempty"`
}

// Headline is the one-line answer: the best trial against the baseline.
type Headline struct {
	Status     string            `json:"status"` // see Headline* constants
	Text       string            `json:"text"`
	Best       string            `json:"best,omitempty"`     // trial ID
	Baseline   string            `json:"baseline,omitempty"` // trial ID
	Metric     string            `json:"metric"`             // objective metric the best was chosen by
	Speedup    *stats.Speedup    `json:"speedup,omitempty"`
	BestKnobs  map[string]string `json:"best_knobs,omitempty"` // the knobs that differ from the baseline
	BestValue  *stats.Estimate   `json:"best_throughput,omitempty"`
	BaseValue  *stats.Estimate   `json:"baseline_throughput,omitempty"`
	Unit       string            `json:"unit"`
	BestIsBase bool              `json:"best_is_baseline,omitempty"`
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
	Index    int               `json:"index"`
	Knobs    map[string]string `json:"knobs"`
	Changed  []string          `json:"changed"`
	Baseline bool              `json:"baseline,omitempty"`
	Best     bool              `json:"best,omitempty"`
	Outcome  store.Outcome     `json:"outcome"`
	Error    string            `json:"error,omitempty"`
	Command  string            `json:"command"`
	Attempts int               `json:"attempts"`

	Samples    stats.Samples  `json:"samples"`    // what the intervals are computed from
	Throughput stats.Estimate `json:"throughput"` // samples/s
	TokensPerS float64        `json:"tokens_per_s,omitempty"`
	StepMS     StepTime       `json:"step_ms"`
	CV         float64        `json:"cv"`        // of the throughput samples
	StepCV     float64        `json:"step_cv"`   // across steps (runner's summary)
	RepeatCV   float64        `json:"repeat_cv"` // across repeats (runner's summary)
	Noisy      bool           `json:"noisy"`
	Throttled  bool           `json:"throttled,omitempty"`

	MFU          float64    `json:"mfu"`
	TFLOPS       float64    `json:"tflops"`
	MemPeakBytes int64      `json:"mem_peak_bytes"`
	FinalLoss    float64    `json:"final_loss"`
	Breakdown    *Breakdown `json:"breakdown,omitempty"`
	Warnings     []string   `json:"warnings,omitempty"`
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
}

// Provenance says where and with what the numbers were measured.
type Provenance struct {
	RunDir      string            `json:"run_dir,omitempty"`
	Command     string            `json:"command"`
	Casestudy   string            `json:"casestudy"` // version (commit)
	StudyPath   string            `json:"study_path"`
	StudySHA256 string            `json:"study_sha256"`
	Host        string            `json:"host"`
	CPU         string            `json:"cpu"`
	GPUs        []string          `json:"gpus"` // "0: NVIDIA H200 (141 GiB)"
	Driver      string            `json:"driver,omitempty"`
	CUDADriver  string            `json:"cuda_driver,omitempty"`
	CUDA        string            `json:"cuda,omitempty"` // torch's CUDA
	NCCL        string            `json:"nccl,omitempty"`
	Torch       string            `json:"torch,omitempty"`
	CuDNN       string            `json:"cudnn,omitempty"`
	Topology    string            `json:"topology,omitempty"`
	Nodes       int               `json:"nodes"`
	Model       map[string]any    `json:"model,omitempty"`
	Workload    map[string]any    `json:"workload,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// OK reports whether the trial finished with a measurement.
func (t *Trial) OK() bool { return t.Outcome == store.OK && t.Throughput.N > 0 }
