package store

import (
	"time"

	"github.com/casestudy/casestudy/engine"
)

// Manifest is manifest.json: everything needed to know what ran where.
type Manifest struct {
	Schema      int    `json:"schema"`
	RunID       string `json:"run_id"`
	Study       string `json:"study"`      // study name
	StudyPath   string `json:"study_path"` // as given on the command line
	StudyText   string `json:"study_text"`
	StudySHA256 string `json:"study_sha256"`
	// Sources is every file of the study's extends chain, the study first,
	// then each file it extends; --resume refuses when any of them changed.
	Sources   []StudySource     `json:"sources,omitempty"`
	Created   time.Time         `json:"created"`
	Command   string            `json:"command"` // the casestudy command line
	Tool      Tool              `json:"tool"`
	Plan      []PlannedTrial    `json:"plan"`
	Dropped   []DroppedTrial    `json:"dropped,omitempty"`
	Baseline  map[string]string `json:"baseline"`
	Objective Objective         `json:"objective"`
	// CompareThreshold is the study's compare.threshold (fraction, 0.05 = 5%);
	// 0 when the study sets none. casestudy compare defaults to it.
	CompareThreshold float64 `json:"compare_threshold,omitempty"`
	// CompareBaseline is the study's compare.baseline (its extends chain
	// included) as an absolute path when the run started, for `casestudy
	// compare NEW` from any folder; "" when the study sets none (and in runs
	// made before it was recorded: then the study text and study_path).
	CompareBaseline string         `json:"compare_baseline,omitempty"`
	Workload        map[string]any `json:"workload"`
	// Measurement is how launches were scheduled and what the verdicts are
	// decided at; nil in runs made before it was recorded (read as a fixed
	// number of repeats at 95%).
	Measurement *Measurement `json:"measurement,omitempty"`
	// Overrides are the command-line overrides of the study's workload
	// (--repeats, --max-time, --warmup, --steps, --gpus, --ranks), flag name ->
	// value as given; --resume applies them again.
	Overrides map[string]string `json:"overrides,omitempty"`
	Model     map[string]any    `json:"model"`
	Host      Host              `json:"host"`
	Engine    *engine.BuildInfo `json:"engine,omitempty"`
	Env       map[string]string `json:"env"` // relevant parent env (NCCL_*, CUDA_*, ...)
	// InheritedEnv is the parent's NCCL_* and CUDA_* variables that reach
	// some trial's ranks unchanged (auto knobs inherit; default unsets).
	InheritedEnv map[string]string `json:"inherited_env,omitempty"`
	// Rehearsal marks a rehearsal (store/rehearsal.go); nil for a measured run.
	Rehearsal *Rehearsal `json:"rehearsal,omitempty"`
}

// Measurement is the launch schedule and the statistical design of a run
// (docs/reports.md explains the design).
type Measurement struct {
	// Repeats is the fixed number of clean launches per trial; 0 with Auto.
	Repeats int `json:"repeats,omitempty"`
	// Auto: repeats: auto, a sequential design that launches until each
	// trial's comparison with the baseline is decided.
	Auto       bool  `json:"auto,omitempty"`
	MinRepeats int   `json:"min_repeats,omitempty"` // auto: launches every trial gets
	MaxRepeats int   `json:"max_repeats,omitempty"` // auto: launches no trial exceeds
	Looks      []int `json:"looks,omitempty"`       // auto: the rounds after which comparisons are decided
	// Alpha is the overall two-sided false-positive rate of one comparison;
	// LookAlpha the rate of each look (Alpha with a fixed number of repeats):
	// every interval of the run is at confidence 1-LookAlpha.
	Alpha     float64 `json:"alpha"`
	LookAlpha float64 `json:"look_alpha"`
	MaxTimeS  float64 `json:"max_time_s,omitempty"` // time budget for launches (0: none)
	// Interleave: launches run in rounds, one per trial, in a fresh random
	// order each round drawn from OrderSeed.
	Interleave bool   `json:"interleave"`
	OrderSeed  uint64 `json:"order_seed,omitempty"`
	// Preheat: one unmeasured launch warmed the GPU before the first measured one.
	Preheat bool `json:"preheat,omitempty"`
	// MaxRelaunches is how many extra launches a trial may get to replace
	// tainted ones.
	MaxRelaunches int `json:"max_relaunches,omitempty"`
}

// StudySource is one file of a study's extends chain as the run read it.
type StudySource struct {
	Path   string `json:"path"` // as given on the command line, or as extends resolved it
	SHA256 string `json:"sha256"`
	Text   string `json:"text"`
}

// Tool identifies the casestudy build.
type Tool struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Go      string `json:"go"`
}

// PlannedTrial is one entry of the resolved plan.
type PlannedTrial struct {
	ID      string            `json:"id"`
	Index   int               `json:"index"`
	Knobs   map[string]string `json:"knobs"`
	Changed []string          `json:"changed"`
}

// DroppedTrial is a combination the planner dropped, with the reason.
type DroppedTrial struct {
	Knobs  map[string]string `json:"knobs"`
	Reason string            `json:"reason"`
}

// Objective mirrors the study's objective.
type Objective struct {
	Metric string `json:"metric"`
	Goal   string `json:"goal"`
}

// Host describes the machine(s).
type Host struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`
	Kernel     string `json:"kernel,omitempty"`
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	MemBytes   uint64 `json:"mem_bytes"`
	Driver     string `json:"driver,omitempty"`
	CUDADriver string `json:"cuda_driver,omitempty"`
	GPUs       []GPU  `json:"gpus,omitempty"`
	TopoMatrix string `json:"topo_matrix,omitempty"` // nvidia-smi topo -m
	Nodes      []Host `json:"nodes,omitempty"`       // other nodes of a multi-node run
	// Engine is the engine library as loaded on this node (filled for the
	// other nodes of a multi-node run; the run's own is Manifest.Engine).
	Engine *engine.BuildInfo `json:"engine,omitempty"`
}

// GPU is one device as NVML reports it.
type GPU struct {
	Index       int      `json:"index"`
	Name        string   `json:"name"`
	UUID        string   `json:"uuid"`
	MemBytes    uint64   `json:"mem_bytes"`
	SMClockMax  uint32   `json:"sm_clock_max_mhz"`
	MemClockMax uint32   `json:"mem_clock_max_mhz"`
	PowerLimitW float64  `json:"power_limit_w"`
	NVLinks     int      `json:"nvlinks"`
	PCIBus      string   `json:"pci_bus"`
	P2P         []string `json:"p2p,omitempty"` // per peer: OK | not supported | ...
}
