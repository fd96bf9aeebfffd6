// Package store owns the run directory: results/<study>/<UTC time>-<id>/ with
// manifest.json, trials.jsonl and logs/. docs/results-format.md documents it.
package store

import (
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
)

// SchemaVersion is the version of manifest.json and trials.jsonl.
const SchemaVersion = 1

// Outcome is how a trial ended.
type Outcome string

const (
	OK          Outcome = "ok"
	Failed      Outcome = "failed"      // engine error (text kept)
	OOM         Outcome = "oom"         // device out of memory
	Timeout     Outcome = "timeout"     // past its deadline or silent past the heartbeat limit
	Crashed     Outcome = "crashed"     // a rank died by signal or exited non-zero unexpectedly
	Unsupported Outcome = "unsupported" // the engine or machine refused a knob
	Skipped     Outcome = "skipped"     // dropped by a constraint
	Interrupted Outcome = "interrupted" // the run was stopped (Ctrl-C); --resume re-runs it
)

// TrialRecord is one line of trials.jsonl: a finished trial with every repeat.
type TrialRecord struct {
	Schema     int               `json:"schema"`
	ID         string            `json:"id"`
	Index      int               `json:"index"`
	Knobs      map[string]string `json:"knobs"`   // every knob, resolved
	Changed    []string          `json:"changed"` // knobs that differ from the baseline
	Outcome    Outcome           `json:"outcome"`
	Error      string            `json:"error,omitempty"`
	FailedRank int               `json:"failed_rank"` // first failing rank; -1 none (always written, 0 is rank 0)
	ExitCode   int               `json:"exit_code,omitempty"`
	Signal     string            `json:"signal,omitempty"`
	Attempts   int               `json:"attempts"`
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	Throttled  bool              `json:"throttled,omitempty"` // a launch was tainted by thermal/HW throttling
	// Stopped says why the schedule stopped launching an ok trial: its
	// comparison with the baseline was decided (the baseline: every
	// comparison with it was), all its launches ran, or the run's time
	// budget was spent.
	Stopped string         `json:"stopped,omitempty"`
	Command string         `json:"command"` // re-runs this trial alone
	Repeats []RepeatRecord `json:"repeats"`
	// Preheat is the timeline of the unmeasured pre-heat launch that warmed
	// the GPU before the run's first measured launch (GPU runs: the trial
	// that launched first). It is no repeat and no statistic uses it.
	Preheat *Timeline     `json:"preheat,omitempty"`
	Summary *TrialSummary `json:"summary,omitempty"` // over all ok repeats
	// Rehearsal is what a rehearsal found (store/rehearsal.go); nil otherwise.
	Rehearsal *RehearsalTrial `json:"rehearsal,omitempty"`
}

// RepeatRecord is one launch of a trial.
type RepeatRecord struct {
	Repeat  int          `json:"repeat"`
	Outcome Outcome      `json:"outcome"`
	Error   string       `json:"error,omitempty"`
	Ranks   []RankRecord `json:"ranks"`
	// Throughput is total samples of all ranks over the measured window's
	// wall clock (Basis "window"), or over the slowest rank's summed step
	// times in older runs; never a mean of per-step rates.
	SamplesPerS float64        `json:"samples_per_s"`
	TokensPerS  float64        `json:"tokens_per_s"`
	GPUSamples  []GPUSample    `json:"gpu_samples,omitempty"`
	Summary     *RepeatSummary `json:"summary,omitempty"`
	// Tainted says why this launch's measurement cannot be trusted (e.g. the GPU
	// was thermally throttled during the measured window); "" when clean. A
	// tainted launch is kept in the record but left out of every statistic.
	Tainted string `json:"tainted,omitempty"`
	// Timeline is where the launch's wall-clock time went, each phase ending
	// when the last rank ended it (store/launch.go, docs/results-format.md).
	Timeline *Timeline `json:"timeline,omitempty"`
	// Throttle is what slowed the GPUs inside the measured window.
	Throttle *Throttle `json:"throttle,omitempty"`
	// SettleStep is the step (warm-up steps count from 0) from which every
	// rank's step times stayed settled (timeline.SettleStep); a value above
	// the warm-up steps means the warm-up was too short.
	SettleStep *int     `json:"settle_step,omitempty"`
	Overlap    *Overlap `json:"overlap,omitempty"`

	// Basis says what SamplesPerS and TokensPerS divide by: "window" (the
	// measured window's wall clock, measure.WindowThroughput) or "" (the
	// slowest rank's summed step times: runs recorded before the window
	// basis).
	Basis string `json:"basis,omitempty"`
}

// RankRecord is what one rank measured in one repeat.
type RankRecord struct {
	Rank        int                  `json:"rank"`
	Node        string               `json:"node,omitempty"`
	GPU         string               `json:"gpu,omitempty"` // CUDA_VISIBLE_DEVICES entry
	Info        *engine.Info         `json:"info,omitempty"`
	WarmupSteps int                  `json:"warmup_steps"`
	Steps       []engine.StepMetrics `json:"steps"` // measured steps only (raw samples)
	Checksum    *engine.Checksum     `json:"checksum,omitempty"`
	ExitCode    int                  `json:"exit_code"`
	Signal      string               `json:"signal,omitempty"`
	LastStep    int                  `json:"last_step"` // last completed step, for timeouts
	// Profile is where the profiled steps after the measured ones spent their
	// time (knob profile; nil when off). Its Error says why a launch has none.
	Profile *profile.Summary `json:"profile,omitempty"`
	// WarmupStepMS are the warm-up steps' step_ms, in order.
	WarmupStepMS []float64 `json:"warmup_step_ms,omitempty"`
	// Timeline is this rank's own phases, from the launcher's start.
	Timeline *Timeline `json:"timeline,omitempty"`
	// NCCL is what NCCL chose, when the rank's log has TUNING lines.
	NCCL *NCCLTuning `json:"nccl,omitempty"`
	// NCCLTransport is how the rank's channels connected, when its log has
	// NCCL's INIT lines.
	NCCLTransport *NCCLTransport `json:"nccl_transport,omitempty"`
	// Comm is the rank's communication progress as its last heartbeat
	// carried it (collectives issued and completed, step, bucket): on a hang
	// or a failed collective, the record names the rank that is behind.
	Comm *engine.CommProgress `json:"comm,omitempty"`
}

// GPUSample is one NVML reading taken while a trial ran.
type GPUSample struct {
	T         float64 `json:"t"` // seconds since the repeat started
	GPU       int     `json:"gpu"`
	SMClock   uint32  `json:"sm_mhz"`
	PowerW    float64 `json:"power_w"`
	TempC     uint32  `json:"temp_c"`
	Throttles uint64  `json:"throttle_reasons"`
}

// RepeatSummary condenses one repeat's steps (rank 0's step times unless stated).
type RepeatSummary struct {
	StepMSMedian float64 `json:"step_ms_median"`
	StepMSP10    float64 `json:"step_ms_p10"`
	StepMSP90    float64 `json:"step_ms_p90"`
	StepCV       float64 `json:"step_cv"`
	RankSpread   float64 `json:"rank_spread"` // (max-min)/median of per-rank median step times
}

// TrialSummary condenses a trial across repeats.
type TrialSummary struct {
	// Value is the trial's one number: the study's objective (Metric, in
	// Unit) as the geometric mean over its clean launches (ok, not tainted),
	// the estimator of the report, compare, history and exports.
	Metric   string  `json:"metric,omitempty"`
	Value    float64 `json:"value,omitempty"`
	Unit     string  `json:"unit,omitempty"`
	Launches int     `json:"launches"` // clean launches
	// SamplesPerS and TokensPerS: geometric means over clean launches.
	SamplesPerS   float64 `json:"samples_per_s"`
	TokensPerS    float64 `json:"tokens_per_s"`
	StepMSMedian  float64 `json:"step_ms_median"`
	StepMSP10     float64 `json:"step_ms_p10"`
	StepMSP90     float64 `json:"step_ms_p90"`
	StepCV        float64 `json:"step_cv"`   // across steps (pooled)
	RepeatCV      float64 `json:"repeat_cv"` // of throughput across clean launches
	Noisy         bool    `json:"noisy"`
	TFLOPS        float64 `json:"tflops"`
	MFU           float64 `json:"mfu"`
	MemPeakBytes  int64   `json:"mem_peak_bytes"`
	FinalLoss     float64 `json:"final_loss"`
	SkippedSteps  int     `json:"skipped_steps"`
	ForwardMS     float64 `json:"forward_ms"`
	BackwardMS    float64 `json:"backward_ms"`
	OptimizerMS   float64 `json:"optimizer_ms"`
	ExposedCommMS float64 `json:"exposed_comm_ms"`
	CommMS        float64 `json:"comm_ms"`
	BubbleMS      float64 `json:"bubble_ms"`
	// TPCommMS: of ExposedCommMS, the tensor group's collectives (median
	// step); 0 without tensor parallelism.
	TPCommMS float64 `json:"tp_comm_ms,omitempty"`
	// GatherWaitMS: ZeRO's wait for the parameters' all-gathers, part of
	// each step's ExposedCommMS (the median over steps of this field alone,
	// as every field here: not the median step's; engine.StepMetrics.GatherWaitMS);
	// 0 without ZeRO.
	GatherWaitMS float64 `json:"gather_wait_ms,omitempty"`

	// OptimStateBytes: the largest rank's optimizer states (ZeRO: its shard's).
	OptimStateBytes int64 `json:"optimizer_state_bytes,omitempty"`
}

// Profiles returns the profile of the given rank in each ok repeat, in repeat
// order (nil entries where that launch has none).
func (t *TrialRecord) Profiles(rank int) []*profile.Summary {
	var out []*profile.Summary
	for _, rp := range t.Repeats {
		if rp.Outcome != OK && rp.Outcome != "" {
			continue
		}
		for i := range rp.Ranks {
			if rp.Ranks[i].Rank == rank {
				out = append(out, rp.Ranks[i].Profile)
			}
		}
	}
	return out
}
