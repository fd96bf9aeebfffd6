package checklist

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/store"
)

// baseKnobs is the baseline of the crafted runs.
var baseKnobs = map[string]string{
	"precision": "fp32", "graphs": "false", "ddp.bucket_mb": "25", "ddp.overlap": "true",
	"nccl.algo": "auto", "nccl.proto": "auto", "pipeline.stages": "1", "pipeline.microbatches": "1",
	"pipeline.schedule": "1f1b", "mps": "false", "procs_per_gpu": "1", "micro_batch": "8",
	"activation_checkpointing": "false",
}

// spec describes one crafted trial.
type spec struct {
	id      string
	set     map[string]string // knobs that differ from baseKnobs
	outcome store.Outcome     // "" = ok
	err     string
	thr     float64 // samples/s
	stepMS  float64
	loss    float64
	ranks   int // default 1
	mfu     float64
	mem     int64
	held    int64   // mem_reserved_bytes
	noise   float64 // launch-to-launch CV of the throughput (launches at thr·(1-noise), thr, thr·(1+noise))
	device  string  // default cpu
	steps   int     // measured steps per repeat, default 20
	// step customises every measured step of every rank.
	step func(rank, i int, s *engine.StepMetrics)
	// prof is rank 0's profile in every repeat (knob profile).
	prof *profile.Summary
}

// noisy gives a spec launch-to-launch noise (CV).
func noisy(sp spec, cv float64) spec {
	sp.noise = cv
	return sp
}

func mkTrial(index int, sp spec) store.TrialRecord {
	knobs := map[string]string{}
	for k, v := range baseKnobs {
		knobs[k] = v
	}
	var changed []string
	for k, v := range sp.set {
		knobs[k] = v
		if baseKnobs[k] != v {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	rec := store.TrialRecord{Schema: 1, ID: sp.id, Index: index, Knobs: knobs, Changed: changed, Outcome: sp.outcome, Error: sp.err}
	if rec.Outcome == "" {
		rec.Outcome = store.OK
	}
	if rec.Outcome != store.OK {
		return rec
	}
	ranks, nsteps, device := max(1, sp.ranks), sp.steps, sp.device
	if nsteps == 0 {
		nsteps = 20
	}
	if device == "" {
		device = "cpu"
	}
	for r := 0; r < 3; r++ {
		rp := store.RepeatRecord{Repeat: r, Outcome: store.OK, SamplesPerS: sp.thr * (1 + sp.noise*float64(r-1))}
		for k := 0; k < ranks; k++ {
			rk := store.RankRecord{Rank: k, GPU: fmt.Sprint(k), WarmupSteps: 5,
				Info: &engine.Info{Device: device, Rank: k, WorldSize: ranks}}
			for i := 0; i < nsteps; i++ {
				s := engine.StepMetrics{Step: i, StepMS: sp.stepMS, ForwardMS: sp.stepMS * 0.3, BackwardMS: sp.stepMS * 0.6,
					OptimizerMS: sp.stepMS * 0.05, Loss: sp.loss, MFU: sp.mfu, MemPeakBytes: sp.mem, MemReservedBytes: sp.held}
				if sp.step != nil {
					sp.step(k, i, &s)
				}
				rk.Steps = append(rk.Steps, s)
			}
			if k == 0 && sp.prof != nil {
				p := *sp.prof
				rk.Profile = &p
			}
			rp.Ranks = append(rp.Ranks, rk)
		}
		rec.Repeats = append(rec.Repeats, rp)
	}
	rec.Summary = &store.TrialSummary{SamplesPerS: sp.thr, StepMSMedian: sp.stepMS, FinalLoss: sp.loss,
		MFU: sp.mfu, MemPeakBytes: sp.mem, RepeatCV: sp.noise}
	return rec
}

// mkRun builds a run of crafted trials with the baseline above; opts edit the manifest.
func mkRun(specs []spec, opts ...func(*store.Manifest)) *store.Run {
	run := &store.Run{Manifest: store.Manifest{
		Schema: 1, Study: "crafted", Baseline: baseKnobs,
		Objective: store.Objective{Metric: "throughput", Goal: "max"},
		Workload:  map[string]any{"warmup_steps": float64(5), "steps": float64(20), "repeats": float64(3)},
	}}
	for _, o := range opts {
		o(&run.Manifest)
	}
	for i, sp := range specs {
		if sp.device == "" && len(run.Manifest.Host.GPUs) > 0 {
			sp.device = "cuda"
		}
		run.Trials = append(run.Trials, mkTrial(i, sp))
	}
	return run
}

// onGPUs gives the host n GPUs of a model with mem bytes and NVLink count, and a topology matrix.
func onGPUs(n int, name string, mem uint64, nvlinks int, topo string) func(*store.Manifest) {
	return func(m *store.Manifest) {
		m.Host.GPUs = nil
		for i := 0; i < n; i++ {
			m.Host.GPUs = append(m.Host.GPUs, store.GPU{Index: i, Name: name, MemBytes: mem, NVLinks: nvlinks})
		}
		m.Host.TopoMatrix = topo
	}
}

// withPlan gives the run the manifest plan casestudy writes: every recorded
// trial (the dropped combinations, outcome skipped, aside) and, after them,
// the trials of unrecorded, planned but without a record (the run stopped
// before them).
func withPlan(run *store.Run, unrecorded ...spec) *store.Run {
	for _, t := range run.Trials {
		if t.Outcome != store.Skipped {
			run.Manifest.Plan = append(run.Manifest.Plan, store.PlannedTrial{ID: t.ID, Index: t.Index, Knobs: t.Knobs, Changed: t.Changed})
		}
	}
	for i, sp := range unrecorded {
		t := mkTrial(len(run.Trials)+i, sp)
		run.Manifest.Plan = append(run.Manifest.Plan, store.PlannedTrial{ID: t.ID, Index: t.Index, Knobs: t.Knobs, Changed: t.Changed})
	}
	return run
}

func withBaseline(k, v string) func(*store.Manifest) {
	return func(m *store.Manifest) {
		b := map[string]string{}
		for kk, vv := range m.Baseline {
			b[kk] = vv
		}
		b[k] = v
		m.Baseline = b
	}
}

func set(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// ruleCase is one table row: a run, the rule's expected status and words the
// message (or recommendation) must contain.
type ruleCase struct {
	name     string
	run      *store.Run
	cfg      Config
	status   Status
	severity Severity // checked when set
	contains []string // in message, evidence or recommendation
	absent   []string // in none of them
	trials   []string // must be among the result's trials
}

func runCases(t *testing.T, rule string, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := evalOne(t, tc.run, rule, tc.cfg)
			text := res.Message + "\n" + res.Recommendation
			for _, e := range res.Evidence {
				text += "\n" + e
			}
			require.Equal(t, tc.status, res.Status, "message: %s", text)
			assert.NotEmpty(t, res.Message)
			if tc.severity != "" {
				assert.Equal(t, tc.severity, res.Severity)
			}
			for _, c := range tc.contains {
				assert.Contains(t, text, c)
			}
			for _, c := range tc.absent {
				assert.NotContains(t, text, c)
			}
			for _, id := range tc.trials {
				assert.Contains(t, res.Trials, id)
			}
			if res.Status == Finding {
				assert.NotEmpty(t, res.Recommendation, "a finding needs a recommendation")
			}
		})
	}
}

func evalOne(t *testing.T, run *store.Run, rule string, cfg Config) Result {
	t.Helper()
	for _, r := range Evaluate(run, cfg) {
		if r.RuleID == rule {
			return r
		}
	}
	t.Fatalf("rule %s not in the registry", rule)
	return Result{}
}

// dpSteps gives every step n buckets of size bytes at busbw GB/s, with comm
// and exposed comm times.
func dpSteps(n int, bytes int64, busbw, commMS, exposedMS float64) func(int, int, *engine.StepMetrics) {
	return func(_, _ int, s *engine.StepMetrics) {
		s.CommMS, s.ExposedCommMS = commMS, exposedMS
		s.Buckets = nil
		for i := 0; i < n; i++ {
			s.Buckets = append(s.Buckets, engine.BucketMetrics{Bytes: bytes, BusBWGBs: busbw})
		}
		s.Collectives = n
	}
}
