// Package study loads study files (YAML), validates them against the knob
// registry and expands their sweeps into plans of trials with stable IDs.
package study

import (
	"fmt"
	"time"
)

// Study is a validated study file with its parents (extends) merged in.
type Study struct {
	Name        string
	Description string
	Path        string   // file it was loaded from
	Text        []byte   // the file's bytes, for provenance
	SHA256      string   // of Text
	Extends     string   // path of the parent as written, "" for none
	Sources     []Source // every file of the extends chain, this one first

	Model     Model
	Workload  Workload
	Baseline  map[string]string // knob name -> canonical value (see knobs.Canonical)
	Sweep     Sweep
	Objective Objective
	Checklist Checklist
	Report    Report
	Compare   Compare
	Launcher  map[string]string // launcher settings (slurm: partition, account, ...)
	// Notes say what planning for a machine changed in the study as written
	// (workload.gpus: all resolved, a baseline the placement cannot run);
	// Expand copies them into the plan.
	Notes []string
}

// Model names what is trained. micro_batch, seq_len, image_size given here are
// defaults of the knobs of the same names.
type Model struct {
	Family string // gpt | bert | resnet50 (engine.Models)
	Preset string
	Layers int // optional override of the preset
	Hidden int // optional override of the preset
}

// Workload says how each trial runs.
type Workload struct {
	GPUs        int    // GPUs per node a trial uses (0 on cpu)
	Nodes       int    // 1 unless multi-node
	Ranks       int    // CPU ranks when device is cpu; GPUs*procs_per_gpu otherwise
	Device      string // auto | cuda | cpu
	WarmupSteps int
	Steps       int
	// WarmupSeconds and MeasureSeconds are floors on the warm-up's and the
	// measured window's wall clock: the steps are minimums, and a launch
	// runs more (in engine calls of up to 20 steps) until each lasted that
	// long, so that every trial measures the sustained, power-limited
	// state. -1: the default for the device (Windows).
	WarmupSeconds  float64
	MeasureSeconds float64
	Repeats        int // launches per trial; 0: auto (launch until decided, MinRepeats..MaxRepeats)
	MinRepeats     int // auto: launches every trial gets first
	MaxRepeats     int // auto: launches no trial exceeds
	// MaxTime is the time budget of a run's launches (0: none): no round
	// starts that would end past it.
	MaxTime    time.Duration
	Timeout    time.Duration
	Seed       int64
	Threads    int  // CPU intra-op threads per rank; 0 = cores / ranks
	Interleave bool // repeats in rounds across trials, a random order each round (default true)
	// GPUsAll: workload.gpus is all, the GPUs of the node the study plans
	// for; GPUs is 1 until ResolveGPUs (or --gpus) sets it.
	GPUsAll bool
	// Rehearse: run every trial as a rehearsal (docs/rehearsal.md): its real
	// ranks and layout as processes sharing the GPUs present, host-staged;
	// nothing measured. casestudy run --rehearse sets it too.
	Rehearse bool
	// ComputeCap is the compute capability of the node's GPUs (89 = 8.9, the
	// lowest where they differ) where the command that plans could read it;
	// 0: unknown. The planner drops precision fp8 below 8.9.
	ComputeCap int
	// WorldOfOne: a one-rank trial runs as a data-parallel world of one
	// (dist.backend nccl on cuda, gloo on cpu; world size 1): the
	// communicator and the reducer run, and the host syncs every step, as
	// on N ranks. The 1-GPU reference of a scaling efficiency 1 -> G sets it
	// (studies/*/ddp1-quick.yaml); casestudy run --predict does too.
	WorldOfOne bool
}

// Sweep is the study's search space.
type Sweep struct {
	Strategy    string              // grid | one-at-a-time | list | greedy
	Knobs       map[string][]string // knob -> canonical values, in file order (see Order)
	Order       []string            // knob names in file order
	Trials      []map[string]string // strategy list: explicit trials
	Exclude     []map[string]string // combinations to drop
	Constraints []string            // expressions that must hold (see docs/study-format.md)
	MaxTrials   int                 // lowers the trial limit for this study (the CLI's --max-trials raises it)
	AllowNVLS   bool                // plan nccl.algo NVLS/NVLSTree (dropped otherwise); NCCL_NVLS_ENABLE is never set to 1
	// AllowTPAcrossNodes plans tp.degree values whose tensor groups span
	// nodes (dropped otherwise: two all-reduces per layer on the network).
	AllowTPAcrossNodes bool

	pos   Pos     // of the sweep section, for errors of Expand
	exprs []*Expr // parsed Constraints
}

// Objective is what "best" means.
type Objective struct {
	Metric string // throughput | step_time | mfu | ...
	Goal   string // max | min
}

// Checklist carries rule threshold overrides: rule ID -> threshold name -> value.
type Checklist struct {
	Disable    []string
	Thresholds map[string]map[string]float64

	pos     map[string]Pos // where each entry is written (checklistKey)
	section Pos            // the checklist section, else the study file
}

// Pos is where a checklist entry is written, for errors: an entry of
// checklist.disable (disable), or a rule (threshold "") or one of its
// thresholds under checklist.thresholds.
func (c Checklist) Pos(rule, threshold string, disable bool) Pos {
	if p, ok := c.pos[checklistKey(rule, threshold, disable)]; ok {
		return p
	}
	return c.section
}

func checklistKey(rule, threshold string, disable bool) string {
	if disable {
		return "disable/" + rule
	}
	return "thresholds/" + rule + "/" + threshold
}

// Report says which formats to write.
type Report struct {
	Formats []string // html | md | json
}

// Compare names a baseline to compare against and the regression threshold.
type Compare struct {
	Baseline  string  // run dir or baseline.json; relative to the study file
	Threshold float64 // fraction, 0.05 = 5%
}

// Trial is one configuration of a plan.
type Trial struct {
	ID      string            `json:"id"`      // stable: derived from the resolved knob values
	Index   int               `json:"index"`   // position in the plan
	Knobs   map[string]string `json:"knobs"`   // every knob resolved (baseline + sweep point)
	Changed []string          `json:"changed"` // knobs that differ from the baseline, sorted
}

// Dropped is a combination that was not planned, and why.
type Dropped struct {
	Knobs  map[string]string `json:"knobs"` // the sweep point as written (canonical values)
	Reason string            `json:"reason"`
}

// Plan is a study expanded into trials.
type Plan struct {
	Study      *Study    `json:"-"`
	Strategy   string    `json:"strategy"`
	Trials     []Trial   `json:"trials"`
	Dropped    []Dropped `json:"dropped"`
	BaselineID string    `json:"baseline_id,omitempty"` // the trial equal to the baseline, if planned
	Notes      []string  `json:"notes,omitempty"`       // Study.Notes: what planning for this machine changed
	Limit      int       `json:"limit"`                 // the trial limit the sweep was checked against
	Size       int       `json:"size"`                  // combinations before drops (greedy: all rounds)
	Rounds     []string  `json:"rounds,omitempty"`      // greedy: the knob of each round; Trials is round 1
}

// RepeatsText is the workload's launches per trial for people: "3 repeats",
// "1 repeat" or "repeats auto (5-20 launches a trial)".
func (w Workload) RepeatsText() string {
	switch {
	case w.Repeats == 0:
		return fmt.Sprintf("repeats auto (%d-%d launches a trial)", w.MinRepeats, w.MaxRepeats)
	case w.Repeats == 1:
		return "1 repeat"
	}
	return fmt.Sprintf("%d repeats", w.Repeats)
}

// MaxLaunches is the most clean launches a trial gets: the fixed repeats, or
// repeats: auto's maximum.
func (w Workload) MaxLaunches() int {
	if w.Repeats == 0 {
		return max(w.MaxRepeats, 1)
	}
	return w.Repeats
}
