package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// A rehearsal (casestudy run --rehearse, workload.rehearse: true;
// docs/rehearsal.md) runs every trial with its real rank count, data-parallel
// x pipeline layout and per-rank micro-batch as processes sharing the GPUs
// present (round-robin), through the engine's host-staged backend (Gloo on
// pinned host copies, engine/native/src/comm_staged.cpp), so that every
// multi-rank path runs for real before cluster time is spent. Per trial it
// launches the trial once, then (once per distinct configuration) one rank
// training the same global batch for the losses (and in fp32, the noise of a
// lower precision), and for the run's first multi-rank trial one launch per
// fault kind with the fault injected in the last rank. With RehearseDistinct
// only the first trial of each distinct layout and path (pathKey) runs; the
// others are recorded as covered by it. Nothing it times is a
// measurement: the run is marked in its manifest and compare, baseline and
// history refuse or skip it.

// rehearsalFault is a fault a rehearsal injects and how a cluster run records it.
type rehearsalFault struct {
	kind     string        // fault.kind (runner/fault.go: worker side; engine side too)
	expected store.Outcome // what the runner must record, naming the rank
	// heartbeat, when set, is the heartbeat limit of the launch (hang: the
	// rank goes silent and the runner must name it without waiting a minute;
	// long enough for ranks that start slowly on a shared machine).
	heartbeat time.Duration
}

// rehearsalFaults are injected in the last rank at the first measured step:
// a rank killed (SIGKILL) and a rank that stalls (stops its heartbeats and
// blocks, as a process wedged in a collective looks to the runner). The
// engine-side stall of a collective (fault.kind stall: a spin kernel before a
// bucket, caught by the communicator's watchdog) joins this list as
// {"stall", store.Failed, 0} once the engine has it.
var rehearsalFaults = []rehearsalFault{
	{kind: faultCrash, expected: store.Crashed},
	{kind: faultHang, expected: store.Timeout, heartbeat: 15 * time.Second},
}

// rehearseSpec turns a trial's spec into its rehearsal: every rank of a
// multi-rank world talks through the host-staged backend, and the ranks
// share the GPUs present round-robin (one launch on this machine, whatever
// workload.nodes says).
func rehearseSpec(sp *trialSpec, m *Machine) {
	sp.NCCLEvidence = false // no NCCL runs: nothing to read back
	for r := range sp.Configs {
		c := &sp.Configs[r]
		if c.Dist.WorldSize > 1 {
			c.Dist.Backend = engine.BackendStaged
		}
		if m.Device == "cuda" && len(m.GPUs) > 0 {
			sp.Devices[r] = m.GPUs[r%len(m.GPUs)]
		}
	}
}

// notApplicable lists the trial's knobs a rehearsal cannot exercise: every
// nccl.* knob (the ranks talk Gloo through host buffers), with a note each.
func notApplicable(knobs map[string]string) (map[string]string, []string) {
	out := map[string]string{}
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(knobs)) {
		if strings.HasPrefix(k, "nccl.") {
			out[k] = knobs[k]
			if !isAuto(knobs[k]) {
				notes = append(notes, fmt.Sprintf("%s=%s not applicable to a rehearsal: the ranks talk Gloo through host buffers, not NCCL", k, knobs[k]))
			}
		}
	}
	if len(out) == 0 {
		return nil, notes
	}
	return out, notes
}

// layoutOf is a spec's data-parallel size, stages and micro-batch: data
// parallel is the ranks / (tp.degree x stages).
func layoutOf(sp *trialSpec) (dp, stages, micro int) {
	c := sp.Configs[0]
	return dataParallelOf(c), max(c.Pipeline.Stages, 1), c.MicroBatch
}

// referenceConfig is one rank training the trial's global batch: the
// micro-batch times the data-parallel size, the pipeline's micro-batches
// accumulated, no pipeline and no communicator (engine/binding's singleRank),
// and no ZeRO: sharding needs data-parallel ranks, and ZeRO-1/2 compute what
// DDP does (bit-identical and within the fp32 reduction order, docs/zero.md),
// so one unsharded rank is their reference too. No tensor parallelism either:
// a tensor group computes the full model's step (every tensor rank of a
// data-parallel rank reads the same batch), so the one rank trains the
// data-parallel ranks' batches with the whole model.
func referenceConfig(c engine.Config) engine.Config {
	ref := c
	ref.MicroBatch = c.MicroBatch * dataParallelOf(c)
	// The engine runs pipeline.microbatches x grad_accum micro-batches a step,
	// with one stage too (trainer.cpp: then it is gradient accumulation).
	ref.GradAccum = max(c.GradAccum, 1) * max(c.Pipeline.Microbatches, 1)
	ref.Pipeline = engine.PipelineConfig{Stages: 1, Microbatches: 1, Schedule: "gpipe"}
	ref.Dist = engine.DistConfig{WorldSize: 1}
	ref.DDP = engine.DDPConfig{}
	ref.Zero = engine.ZeroConfig{}
	ref.TP = nil
	ref.Fault = engine.FaultConfig{}
	return ref
}

// subSpec is a launch of the rehearsal beside the trial's own: the same trial
// (its logs go with the trial's, as further repeats) with other configs.
func rehearsalSpec(sp *trialSpec, configs []engine.Config, devices []string) *trialSpec {
	s := *sp
	s.Ranks = len(configs)
	s.Configs = configs
	s.Devices = devices
	s.Set = maps.Clone(sp.Set)
	return &s
}

// runRehearsal rehearses the selected trials one after the other.
func (r *Runner) runRehearsal(ctx context.Context, res *Result) error {
	o := &r.opts
	refs := map[string]*store.RehearsalLaunch{} // by reference config: trials that differ only in DDP knobs share one
	faulted := false                            // the run's faults ran
	covered := map[string]string{}              // pathKey -> the trial that rehearsed it
	rep := 0
	for _, t := range r.select_(o.Plan.Trials) {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		sp, err := buildSpec(o.Study, t, o.Machine)
		if err != nil {
			return err
		}
		dp, stages, micro := layoutOf(sp)
		rh := &store.RehearsalTrial{Ranks: sp.Ranks, DataPar: dp, Stages: stages, MicroBatch: micro}
		if tp := tpDegree(sp.Configs[0]); tp > 1 {
			rh.TensorPar = tp
		}
		if o.Machine.Device == "cuda" {
			rh.Devices = slices.Clone(sp.Devices)
			rh.RanksPerGPU = ranksPerGPU(sp.Devices)
		}
		if o.RehearsalEstimates != nil {
			rh.EstimateBytes = o.RehearsalEstimates[t.ID]
		}
		if m, ok := o.RehearsalModels[t.ID]; ok {
			rh.EstimateModel = &m
		}
		rh.ProcessBytes = processBytes(sp.Configs[0])
		rh.NotApplicable, rh.Notes = notApplicable(t.Knobs)
		rec := &store.TrialRecord{ID: t.ID, Index: t.Index, Knobs: t.Knobs, Changed: t.Changed, FailedRank: -1,
			Command: o.TrialCommand(t.ID), Rehearsal: rh}
		p := &pending{spec: sp, rec: rec}
		if sp.Unsupported != "" {
			now := time.Now().UTC()
			rec.Started, rec.Finished, rec.Outcome, rec.Error = now, now, store.Unsupported, sp.Unsupported
			if err := r.commit(rec, res); err != nil {
				return err
			}
			continue
		}
		key := pathKey(sp)
		if why := o.RehearsalUnfit[t.ID]; o.RehearseDistinct && why != "" {
			now := time.Now().UTC()
			rec.Started, rec.Finished, rec.Outcome, rec.Error = now, now, store.Skipped, why
			if err := r.commit(rec, res); err != nil {
				return err
			}
			continue
		}
		if o.RehearseDistinct && covered[key] != "" {
			now := time.Now().UTC()
			rec.Started, rec.Finished, rec.Outcome = now, now, store.Skipped
			rec.Error = fmt.Sprintf("covered by the rehearsal of trial %s: the same layout and paths (%s)", covered[key], key)
			if err := r.commit(rec, res); err != nil {
				return err
			}
			continue
		}
		covered[key] = t.ID
		rec.Started = time.Now().UTC()
		rep++
		o.Progress.TrialStart(rep, len(o.Plan.Trials), rec, 0, 1)
		rr, err := r.launchWithRetries(ctx, p, 0)
		switch {
		case err != nil && ctx.Err() != nil:
			rec.Outcome, rec.Error = store.Interrupted, "stopped by a signal; run the rehearsal again"
		case err != nil:
			rec.Outcome, rec.Error = store.Failed, err.Error()
		default:
			rec.Repeats = append(rec.Repeats, rr.Rec)
			rec.Outcome, rec.Error = rr.Rec.Outcome, rr.Rec.Error
			rec.FailedRank, rec.ExitCode, rec.Signal = rr.FailedRank, rr.ExitCode, rr.Signal
		}
		next := 1 // the repeat number of the next launch's logs
		// oneRank is the one-rank launch of c, once per distinct config.
		oneRank := func(c engine.Config) *store.RehearsalLaunch {
			key := rehearsalConfigKey(c)
			if refs[key] == nil {
				refs[key] = r.rehearseReference(ctx, sp, c, next)
				next++
			}
			return refs[key]
		}
		if rec.Outcome == store.OK && sp.Configs[0].Dist.WorldSize > 1 && ctx.Err() == nil {
			ref := referenceConfig(sp.Configs[0])
			if key := rehearsalConfigKey(ref); o.RehearsalNoReference[t.ID] != "" && refs[key] == nil {
				refs[key] = &store.RehearsalLaunch{Outcome: store.Skipped, Error: o.RehearsalNoReference[t.ID], MicroBatch: ref.MicroBatch, GradAccum: ref.GradAccum}
			}
			rh.Reference = oneRank(ref)
			// A tensor-parallel trial in 16 bits is judged by its fp32 twin; a twin
			// at a smaller micro-batch (the trial's does not fit in fp32) is
			// compared with one rank at the twin's global batch, so the full-batch
			// fp32 one-rank run (which does not fit either) is not launched.
			tp16 := tpDegree(sp.Configs[0]) > 1 && ref.Precision != "fp32"
			mb := o.RehearsalTwinMicroBatch[t.ID]
			if wantNoiseReference(ref.Precision, rh.Reference, tp16, mb) && ctx.Err() == nil {
				noise := ref
				noise.Precision = "fp32"
				rh.NoiseReference = oneRank(noise)
			}
			if wantTwin(tp16, mb, rh.NoiseReference) && ctx.Err() == nil {
				if why := o.RehearsalNoTwin[t.ID]; why != "" {
					rh.TwinFP32 = &store.RehearsalLaunch{Outcome: store.Skipped, Error: why, MicroBatch: sp.Configs[0].MicroBatch, GradAccum: sp.Configs[0].GradAccum}
				} else {
					rh.TwinFP32 = r.rehearseTwinFP32(ctx, sp, mb, next)
					next++
					if mb > 0 && rh.TwinFP32.Outcome == store.OK && ctx.Err() == nil {
						// The twin's global batch is not the trial's: one rank in
						// fp32 training the twin's.
						twin := sp.Configs[0]
						twin.MicroBatch = mb
						twinRef := referenceConfig(twin)
						twinRef.Precision = "fp32"
						rh.TwinReference = oneRank(twinRef)
					}
				}
			}
		}
		if rec.Outcome == store.OK && sp.Configs[0].Dist.WorldSize > 1 && !faulted && !o.RehearseNoFaults && ctx.Err() == nil {
			faulted = true
			for _, f := range rehearsalFaults {
				rh.Faults = append(rh.Faults, r.rehearseFault(ctx, sp, f, next))
				next++
			}
		}
		rec.Finished = time.Now().UTC() // no Summary: a rehearsal's timings are no value of the trial
		if err := r.commit(rec, res); err != nil {
			return err
		}
		if rec.Outcome == store.Interrupted {
			return ErrInterrupted
		}
	}
	return nil
}

// rehearseReference launches one rank training the trial's global batch.
func (r *Runner) rehearseReference(ctx context.Context, sp *trialSpec, ref engine.Config, rep int) *store.RehearsalLaunch {
	dev := []string{""}
	if len(sp.Devices) > 0 {
		dev[0] = sp.Devices[0]
	}
	out := &store.RehearsalLaunch{MicroBatch: ref.MicroBatch, GradAccum: ref.GradAccum}
	rr, err := r.runRepeat(ctx, rehearsalSpec(sp, []engine.Config{ref}, dev), rep)
	if err != nil {
		out.Outcome, out.Error = store.Failed, err.Error()
		return out
	}
	out.Outcome, out.Error = rr.Rec.Outcome, rr.Rec.Error
	if len(rr.Rec.Ranks) > 0 {
		for _, s := range rr.Rec.Ranks[0].Steps {
			out.Losses = append(out.Losses, s.Loss)
			out.Steps = append(out.Steps, s.Step)
		}
	}
	return out
}

// rehearseTwinFP32 launches the trial's ranks again in fp32
// (store.RehearsalTrial.TwinFP32), at micro-batch mb when it is not 0 (the
// trial's does not fit in fp32: CheckRehearsalFit's TwinMicroBatch).
func (r *Runner) rehearseTwinFP32(ctx context.Context, sp *trialSpec, mb, rep int) *store.RehearsalLaunch {
	configs := slices.Clone(sp.Configs)
	for i := range configs {
		configs[i].Precision = "fp32"
		if mb > 0 {
			configs[i].MicroBatch = mb
		}
	}
	out := &store.RehearsalLaunch{MicroBatch: configs[0].MicroBatch, GradAccum: configs[0].GradAccum}
	rr, err := r.runRepeat(ctx, rehearsalSpec(sp, configs, slices.Clone(sp.Devices)), rep)
	if err != nil {
		out.Outcome, out.Error = store.Failed, err.Error()
		return out
	}
	out.Outcome, out.Error = rr.Rec.Outcome, rr.Rec.Error
	out.Losses = store.MeanLosses(rr.Rec.Ranks)
	for i := range out.Losses {
		out.Steps = append(out.Steps, rr.Rec.Ranks[0].Steps[i].Step)
	}
	return out
}

// rehearseFault launches the trial with fault f in its last rank at the first
// measured step and checks that the runner classifies it as on a cluster.
func (r *Runner) rehearseFault(ctx context.Context, sp *trialSpec, f rehearsalFault, rep int) store.RehearsalFault {
	rank := sp.Ranks - 1
	at := r.opts.Study.Workload.WarmupSteps
	configs := slices.Clone(sp.Configs)
	for i := range configs {
		configs[i].Fault = engine.FaultConfig{Kind: f.kind, Rank: rank, AtStep: at}
	}
	out := store.RehearsalFault{Kind: f.kind, Rank: rank, AtStep: at, Expected: f.expected, FailedRank: -1}
	if f.heartbeat > 0 {
		saved := r.opts.HeartbeatLimit
		r.opts.HeartbeatLimit = f.heartbeat
		defer func() { r.opts.HeartbeatLimit = saved }()
	}
	rr, err := r.runRepeat(ctx, rehearsalSpec(sp, configs, slices.Clone(sp.Devices)), rep)
	if err != nil {
		out.Outcome, out.Error = store.Failed, err.Error()
		return out
	}
	out.Outcome, out.Error, out.FailedRank = rr.Rec.Outcome, rr.Rec.Error, rr.FailedRank
	out.Classified = out.Outcome == f.expected && out.FailedRank == rank
	return out
}

// pathKey names what a trial's rehearsal exercises: its layout and the
// knobs that choose other code (precision, accumulation, compression,
// schedule, ZeRO stage).
func pathKey(sp *trialSpec) string {
	c := sp.Configs[0]
	dp, stages, micro := layoutOf(sp)
	key := fmt.Sprintf("ranks %d, dp %d x pp %d, micro-batch %d, %s, grad_accum %d, compression %s, schedule %s",
		sp.Ranks, dp, stages, micro, c.Precision, max(c.GradAccum, 1), rehearsalOrNone(c.DDP.Compression), rehearsalOrNone(c.Pipeline.Schedule))
	if c.Zero.Stage > 0 { // ZeRO reduce-scatters and gathers: other code
		key += fmt.Sprintf(", zero %d", c.Zero.Stage)
	}
	if tp := tpDegree(c); tp > 1 { // tensor-parallel layers, and SP's gathers and scatters
		key += fmt.Sprintf(", tp %d", tp)
		if c.TP.SequenceParallel {
			key += " with sequence parallel"
		}
	}
	return key
}

func rehearsalOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ranksPerGPU is the most ranks one device entry holds.
func ranksPerGPU(devices []string) int {
	n := map[string]int{}
	most := 0
	for _, d := range devices {
		n[d]++
		most = max(most, n[d])
	}
	return most
}

// configKey identifies an engine config (for sharing reference launches).
func rehearsalConfigKey(c engine.Config) string { return fmt.Sprintf("%+v", c) }

// RehearsalFor is the manifest's mark of a rehearsal on machine m.
func RehearsalFor(m *Machine) *store.Rehearsal {
	rh := &store.Rehearsal{Note: store.RehearsalNote, Backend: "gloo-staged", Device: m.Device}
	if m.Device == "cuda" {
		rh.GPUs = slices.Clone(m.GPUs)
		rh.GPUMemoryBytes, rh.GPUName = m.gpuMemory()
	}
	return rh
}

// RehearsalSteps caps a rehearsal's steps: it checks paths, not speed (1
// warm-up and 4 measured steps unless the command line says otherwise). The
// time floors of measured runs (workload.warmup_seconds, measure_seconds) are
// off: on a GPU they would stretch those steps to seconds of load, and the
// losses compared against the one-rank run would start after a warm-up of
// unplanned length.
func RehearsalSteps(w *study.Workload, warmupSet, stepsSet bool) {
	w.WarmupSeconds, w.MeasureSeconds = 0, 0
	if !warmupSet {
		w.WarmupSteps = min(w.WarmupSteps, 1)
	}
	if !stepsSet {
		w.Steps = min(w.Steps, 4)
	}
	w.Repeats = 1
}

// wantNoiseReference: whether a trial in 16 bits whose one-rank reference
// (ref, at precision p) ran also gets the fp32 one-rank run of the same
// global batch (its noise floor; a tensor-parallel trial's full-batch fp32
// twin is compared with it). Not for a tensor-parallel trial whose twin runs
// at a smaller micro-batch twinMB: that twin is compared with one rank at its
// own global batch, and the full batch does not fit in fp32.
func wantNoiseReference(p string, ref *store.RehearsalLaunch, tp16 bool, twinMB int) bool {
	return p != "fp32" && ref != nil && ref.Outcome == store.OK && !(tp16 && twinMB > 0)
}

// wantTwin: whether a tensor-parallel trial in 16 bits gets its fp32 twin
// (launched, or recorded skipped when it fits at no micro-batch): at a
// smaller micro-batch always, at the trial's only when the full-batch fp32
// one-rank run it is compared with ran.
func wantTwin(tp16 bool, twinMB int, noise *store.RehearsalLaunch) bool {
	return tp16 && (twinMB > 0 || noise != nil && noise.Outcome == store.OK)
}
