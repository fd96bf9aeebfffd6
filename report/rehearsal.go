package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// The Rehearsal section: what a rehearsal (docs/rehearsal.md) answers per
// trial, derived from its records. Nothing here is a measurement: a rehearsal
// summary has kind "rehearsal", no values, no comparisons and no verdicts, and
// compare, baseline and history refuse or skip it.

// KindRehearsal is the kind of a rehearsal's summary.json: never compared.
const KindRehearsal = "rehearsal"

// HeadlineRehearsal is the headline status of a rehearsal.
const HeadlineRehearsal = "rehearsal"

// Tolerances of the loss agreement with the one-rank reference: fp32 1e-5
// relative; other precisions the measured noise of the precision, twice the
// distance between the reference in that precision and in fp32 (at least the
// fp32 tolerance).
const (
	RehearsalFP32Tol = 1e-5
	rehearsalNoiseK  = 2
)

// RehearsalSection is the Rehearsal section of a rehearsal's summary.
type RehearsalSection struct {
	Note    string           `json:"note"` // store.RehearsalNote
	Why     string           `json:"why"`  // why its timings are not measurements
	Backend string           `json:"backend"`
	Device  string           `json:"device"`
	GPUs    []string         `json:"gpus,omitempty"`
	GPU     string           `json:"gpu,omitempty"`
	GPUMem  int64            `json:"gpu_memory_bytes,omitempty"` // each rank's own on the real machine
	Trials  []RehearsalTrial `json:"trials"`
	// NotRehearsed are the planned trials that have no rehearsal of their
	// own (skipped: covered by another trial's, or refused at plan time; not
	// run: no record), grouped by outcome and reason.
	NotRehearsed []RehearsalSkip `json:"not_rehearsed,omitempty"`
}

// RehearsalSkip is a group of planned trials not rehearsed for one reason.
type RehearsalSkip struct {
	Outcome store.Outcome `json:"outcome"` // skipped | not_run
	Reason  string        `json:"reason"`  // as recorded; a group's own IDs read "each trial"
	Trials  []string      `json:"trials"`  // IDs, in plan order
	// Baseline is the baseline's ID where it is one of Trials.
	Baseline string `json:"baseline,omitempty"`
}

// The reason of a planned trial without a record, of one and of several.
const (
	rehearsalNotRunReason  = "no record in trials.jsonl: the rehearsal stopped before this trial (rehearse again for it)"
	rehearsalNotRunReasons = "no record in trials.jsonl: the rehearsal stopped before these trials (rehearse again for them)"
)

// RehearsalTrial is what the rehearsal of one trial found.
type RehearsalTrial struct {
	ID      string            `json:"id"`
	Label   string            `json:"label"`
	Knobs   map[string]string `json:"knobs"`
	Outcome store.Outcome     `json:"outcome"`
	// Error is the first error, classified: the outcome, the rank, the text.
	Error       string   `json:"error,omitempty"`
	Ranks       int      `json:"ranks"`
	DataPar     int      `json:"data_parallel"`
	TensorPar   int      `json:"tensor_parallel,omitempty"` // 0: none
	Stages      int      `json:"stages"`
	MicroBatch  int      `json:"micro_batch"`
	RanksPerGPU int      `json:"ranks_per_gpu,omitempty"`
	Devices     []string `json:"devices,omitempty"`

	Memory     *RehearsalMemory       `json:"memory,omitempty"`
	Buckets    *RehearsalBuckets      `json:"buckets,omitempty"`
	Pipeline   *RehearsalPipeline     `json:"pipeline,omitempty"`
	Checksums  *RehearsalChecksums    `json:"checksums,omitempty"`
	Losses     *RehearsalLosses       `json:"losses,omitempty"`
	Paths      []string               `json:"paths,omitempty"` // compression, top-k, ...: what ran
	Faults     []store.RehearsalFault `json:"faults,omitempty"`
	NotApplied []string               `json:"not_applicable,omitempty"`
	// StepMS is rank 0's median step time: a rehearsal's, not a measurement.
	StepMS float64 `json:"rehearsal_step_ms,omitempty"`
}

// RehearsalMemory is one rank's memory against the real GPU's capacity.
type RehearsalMemory struct {
	PeakBytes     int64 `json:"peak_bytes"`     // largest over ranks and steps
	ReservedBytes int64 `json:"reserved_bytes"` // largest over ranks and steps
	PeakRank      int   `json:"peak_rank"`
	EstimateBytes int64 `json:"estimate_bytes,omitempty"` // plan-time estimate
	CapacityBytes int64 `json:"capacity_bytes,omitempty"` // one GPU's (0: CPU ranks)
	Fits          *bool `json:"fits,omitempty"`           // the peak within rehearsalBudget: the process's overhead and the headroom, as LargestMicroBatch
	// LargestMicroBatch is the largest per-rank micro-batch whose extrapolated
	// peak fits the capacity (0: unknown or none); Method says how it was
	// extrapolated (rehearsal_mbfit.go), or why not.
	LargestMicroBatch int    `json:"largest_micro_batch,omitempty"`
	Method            string `json:"method,omitempty"`
	// The plan's model (store.RankMemoryModel) and its calibration: the
	// static part, the plan's per-sample part and the one that meets the
	// measured peak, and the largest micro-batch of the plan's model alone.
	StaticBytes           int64   `json:"static_bytes,omitempty"`
	PlanPerSampleBytes    float64 `json:"plan_per_sample_bytes,omitempty"`
	PerSampleBytes        float64 `json:"per_sample_bytes,omitempty"`
	PlanLargestMicroBatch int     `json:"plan_largest_micro_batch,omitempty"`
}

// RehearsalBuckets is the reducer's bucket plan as rank 0 ran it.
type RehearsalBuckets struct {
	Count      int     `json:"count"`
	Bytes      []int64 `json:"bytes"`
	FirstBytes int64   `json:"first_bytes"`
	Ops        string  `json:"ops"` // all_reduce | all_gather
}

// RehearsalPipeline is the pipeline's partition and schedule.
type RehearsalPipeline struct {
	Schedule     string   `json:"schedule"`
	Microbatches int      `json:"microbatches"`
	BalanceBy    string   `json:"balance_by"`
	Balance      []int    `json:"balance"` // layers per stage
	Stages       []string `json:"stages"`  // "stage 0: layers 0-3" (inclusive)
}

// RehearsalChecksums says whether ranks that must hold equal parameters do.
type RehearsalChecksums struct {
	DataParallelEqual *bool  `json:"data_parallel_equal,omitempty"` // every DP rank (no pipeline)
	ReplicasEqual     *bool  `json:"stage_replicas_equal,omitempty"`
	Detail            string `json:"detail"`
}

// RehearsalLosses are the first steps' losses against one rank training the
// same global batch.
type RehearsalLosses struct {
	Trial     []float64 `json:"trial"` // the mean over ranks per measured step
	Reference []float64 `json:"reference,omitempty"`
	MaxRel    float64   `json:"max_rel_diff,omitempty"`
	Tolerance float64   `json:"tolerance,omitempty"`
	Agree     *bool     `json:"agree,omitempty"`
	// NotChecked: the check could not run (a tensor-parallel trial in 16-bit
	// whose fp32 twin did not run or failed); Agree is false (fails closed)
	// and the verdict reads "not checked", not "DISAGREE".
	NotChecked bool   `json:"not_checked,omitempty"`
	Detail     string `json:"detail"`
}

const rehearsalWhy = "the ranks shared the GPUs of this machine and talked through host-staged Gloo collectives, " +
	"so every time is slowed by the sharing and the host copies and says nothing of the real machine; " +
	"a rehearsal checks that the plan runs and computes right, and never enters verdicts, baselines, history or compare"

// buildRehearsal is Build for a rehearsal.
func buildRehearsal(run *store.Run) *Summary {
	m := &run.Manifest
	rh := m.Rehearsal
	s := &Summary{Schema: SchemaVersion, Kind: KindRehearsal, Study: m.Study, RunID: m.RunID, Created: m.Created.UTC(),
		Objective: m.Objective, Counts: map[string]int{}, Findings: nil, Provenance: provenance(run)}
	s.Metric, _ = meas.MetricFor(m.Objective)
	s.Headline = Headline{Status: HeadlineRehearsal, Metric: s.Metric.Name, Unit: s.Metric.Unit}
	sec := &RehearsalSection{Note: store.RehearsalNote, Why: rehearsalWhy, Backend: rh.Backend, Device: rh.Device,
		GPUs: rh.GPUs, GPU: rh.GPUName, GPUMem: rh.GPUMemoryBytes}
	byID := map[string]*store.TrialRecord{}
	for i := range run.Trials {
		byID[run.Trials[i].ID] = &run.Trials[i]
	}
	// Every planned trial counts: one without a record did not run (the
	// rehearsal stopped before it), as Build says of a measurement's.
	for _, p := range run.Unrecorded() {
		byID[p.ID] = &store.TrialRecord{ID: p.ID, Index: p.Index, Knobs: p.Knobs, Changed: p.Changed, Outcome: NotRun,
			Error: rehearsalNotRunReason, FailedRank: -1}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := byID[ids[i]], byID[ids[j]]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.ID < b.ID
	})
	ran, wrong, notChecked := 0, 0, 0
	var skipped []*store.TrialRecord
	for _, id := range ids {
		rec := byID[id]
		s.Counts[string(rec.Outcome)]++
		s.Trials = append(s.Trials, Trial{ID: rec.ID, Index: rec.Index, Knobs: rec.Knobs, Changed: rhNonNil(rec.Changed),
			Outcome: rec.Outcome, Error: rec.Error, Command: rec.Command, Baseline: len(rec.Changed) == 0})
		if rec.Outcome == store.Skipped || rec.Outcome == NotRun {
			skipped = append(skipped, rec)
			continue
		}
		t := rehearseTrial(rec, rh)
		if t.Outcome == store.OK {
			ran++
		}
		switch {
		case t.wrong() && t.onlyNotChecked():
			notChecked++
		case t.wrong():
			wrong++
		}
		sec.Trials = append(sec.Trials, t)
	}
	setLabels(s)
	for i := range sec.Trials {
		for _, t := range s.Trials {
			if t.ID == sec.Trials[i].ID {
				sec.Trials[i].Label = t.Label
			}
		}
	}
	sec.NotRehearsed = rehearsalSkips(skipped)
	s.Rehearsal = sec
	s.Headline.Text = fmt.Sprintf("%s: %d of %d trials ran", store.RehearsalNote, ran, len(s.Trials))
	if wrong > 0 {
		s.Headline.Text += fmt.Sprintf("; %d disagree (checksums, losses or fault handling)", wrong)
	}
	if notChecked > 0 {
		s.Headline.Text += fmt.Sprintf("; %d not checked (a tensor-parallel layout whose fp32 twin did not run or failed: fails closed)", notChecked)
	}
	return s
}

// rehearsalSkips groups the trials not rehearsed by outcome and reason, in
// the order of each group's first trial. A reason that names its own trial
// ("refused at plan time, not rehearsed: trial 03a150f9 (8 ranks ...") is
// grouped with the same reason of other trials, the ID read "each trial"
// where the group holds several.
func rehearsalSkips(recs []*store.TrialRecord) []RehearsalSkip {
	const self = "\x00"
	var out []RehearsalSkip
	at := map[[2]string]int{}
	for _, rec := range recs {
		reason := rec.Error
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i]
		}
		if len(reason) > 1000 {
			reason = reason[:1000] + "..."
		}
		if reason == "" {
			reason = "no reason recorded"
		}
		key := [2]string{string(rec.Outcome), strings.ReplaceAll(reason, "trial "+rec.ID, self)}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, RehearsalSkip{Outcome: rec.Outcome, Reason: key[1]})
		}
		out[i].Trials = append(out[i].Trials, rec.ID)
		if len(rec.Changed) == 0 {
			out[i].Baseline = rec.ID
		}
	}
	for i := range out {
		g := &out[i]
		who := "each trial"
		if len(g.Trials) == 1 {
			who = "trial " + g.Trials[0]
		}
		g.Reason = strings.ReplaceAll(g.Reason, self, who)
		if g.Reason == rehearsalNotRunReason && len(g.Trials) > 1 {
			g.Reason = rehearsalNotRunReasons
		}
	}
	return out
}

func rhNonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// wrong says whether a trial ran but computed wrongly, or a fault in it was
// not classified as on a cluster.
func (t *RehearsalTrial) wrong() bool {
	return t.wrongBesidesLosses() || (t.Losses != nil && t.Losses.Agree != nil && !*t.Losses.Agree)
}

// wrongBesidesLosses is wrong without the losses: the checksums and faults.
func (t *RehearsalTrial) wrongBesidesLosses() bool {
	bad := func(b *bool) bool { return b != nil && !*b }
	for _, f := range t.Faults {
		if !f.Classified {
			return true
		}
	}
	return t.Checksums != nil && (bad(t.Checksums.DataParallelEqual) || bad(t.Checksums.ReplicasEqual))
}

// onlyNotChecked says whether the trial's one failing check is its losses,
// not checked (RehearsalLosses.NotChecked): its checksums and faults are
// right.
func (t *RehearsalTrial) onlyNotChecked() bool {
	return t.Losses != nil && t.Losses.NotChecked && !t.wrongBesidesLosses()
}

func rehearseTrial(rec *store.TrialRecord, rh *store.Rehearsal) RehearsalTrial {
	t := RehearsalTrial{ID: rec.ID, Knobs: rec.Knobs, Outcome: rec.Outcome}
	info := rec.Rehearsal
	if info == nil {
		info = &store.RehearsalTrial{}
	}
	t.Ranks, t.DataPar, t.Stages, t.MicroBatch = info.Ranks, info.DataPar, info.Stages, info.MicroBatch
	t.TensorPar = info.TensorPar
	t.RanksPerGPU, t.Devices, t.Faults, t.NotApplied = info.RanksPerGPU, info.Devices, info.Faults, info.Notes
	if rec.Outcome != store.OK {
		t.Error = string(rec.Outcome)
		if rec.FailedRank >= 0 {
			t.Error += fmt.Sprintf(" on rank %d", rec.FailedRank)
		}
		if rec.Error != "" {
			t.Error += ": " + rhFirstLine(rec.Error)
		}
	}
	if len(rec.Repeats) == 0 {
		return t
	}
	ranks := rec.Repeats[0].Ranks
	if len(ranks) == 0 {
		return t
	}
	t.Memory = rehearsalMemory(ranks, info, rh, rec.Outcome)
	t.Buckets = rehearsalBuckets(ranks[0])
	t.Pipeline = rehearsalPipeline(ranks, rec.Knobs)
	if rec.Outcome == store.OK {
		if t.TensorPar > 1 {
			t.Checksums = rehearsalTPChecksums(ranks, t.TensorPar, t.DataPar, t.Stages)
		} else {
			t.Checksums = rehearsalChecksums(ranks, t.DataPar, t.Stages)
		}
		t.Losses = rehearsalLosses(ranks, info, rec.Knobs, t.DataPar)
	}
	t.Paths = rehearsalPaths(rec.Knobs, t.Buckets, t.Stages)
	var ms []float64
	for _, st := range ranks[0].Steps {
		ms = append(ms, st.StepMS)
	}
	if len(ms) > 0 {
		t.StepMS = stats.DescribeOf(ms).Median
	}
	if info.Reference != nil && info.Reference.Outcome != store.OK && info.Reference.Outcome != "" {
		t.Losses = rhOrLosses(t.Losses)
		t.Losses.Detail = fmt.Sprintf("the one-rank reference did not run: %s: %s", info.Reference.Outcome, rhFirstLine(info.Reference.Error))
	}
	return t
}

func rhOrLosses(l *RehearsalLosses) *RehearsalLosses {
	if l == nil {
		return &RehearsalLosses{}
	}
	return l
}

func rhFirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// rehearsalProcessBytes is what a process holds outside the caching
// allocator (CUDA context, libraries, communicators), counted against the
// capacity: as the plan counted it (runner.RankEstimate, recorded with the
// trial); records written before it was recorded counted store.LegacyProcessBytes.
func rehearsalProcessBytes(info *store.RehearsalTrial) int64 {
	if info.ProcessBytes > 0 {
		return info.ProcessBytes
	}
	return store.LegacyProcessBytes
}

// rehearsalMemory is the ranks' peak against one GPU's capacity; without a
// peak, Method says why: the trial did not finish (its outcome), or finished
// on CPU ranks (the engine reports allocator peaks on CUDA devices only), or
// finished on CUDA with no peak recorded.
func rehearsalMemory(ranks []store.RankRecord, info *store.RehearsalTrial, rh *store.Rehearsal, outcome store.Outcome) *RehearsalMemory {
	m := &RehearsalMemory{EstimateBytes: info.EstimateBytes, CapacityBytes: rh.GPUMemoryBytes, PeakRank: -1}
	for _, r := range ranks {
		for _, s := range r.Steps {
			if s.MemPeakBytes > m.PeakBytes {
				m.PeakBytes, m.PeakRank = s.MemPeakBytes, r.Rank
			}
			m.ReservedBytes = max(m.ReservedBytes, s.MemReservedBytes)
		}
	}
	if m.PeakBytes == 0 {
		switch {
		case outcome != store.OK:
			m.Method = fmt.Sprintf("no memory statistics: the trial did not finish (%s)", outcome)
		case rhOnCPU(ranks, rh):
			m.Method = "no memory statistics: the ranks ran on CPU, and the engine reports allocator peaks on CUDA devices only"
		default:
			m.Method = "no memory statistics: no rank recorded an allocator peak"
		}
		return m
	}
	if m.CapacityBytes <= 0 {
		m.Method = "CPU ranks: no GPU capacity to hold the memory against"
		return m
	}
	process := rehearsalProcessBytes(info)
	fits := m.PeakBytes <= rehearsalBudget(m.CapacityBytes, process)
	m.Fits = &fits
	rehearsalLargestMicroBatch(m, info, process)
	return m
}

// rhOnCPU says whether the ranks ran on CPU: as their engines said, else as
// the rehearsal's device.
func rhOnCPU(ranks []store.RankRecord, rh *store.Rehearsal) bool {
	for _, r := range ranks {
		if r.Info != nil && r.Info.Device != "" {
			return r.Info.Device == "cpu"
		}
	}
	return rh.Device == "cpu"
}

func rehearsalBuckets(r store.RankRecord) *RehearsalBuckets {
	if len(r.Steps) == 0 {
		return nil
	}
	last := r.Steps[len(r.Steps)-1]
	if len(last.Buckets) == 0 {
		return nil
	}
	b := &RehearsalBuckets{Count: len(last.Buckets)}
	ops := map[string]bool{}
	for _, x := range last.Buckets {
		b.Bytes = append(b.Bytes, x.Bytes)
		op := x.Op
		if op == "" {
			op = "all_reduce"
		}
		ops[op] = true
	}
	b.FirstBytes = b.Bytes[0]
	b.Ops = strings.Join(slices.Sorted(func(yield func(string) bool) {
		for k := range ops {
			if !yield(k) {
				return
			}
		}
	}), ", ")
	return b
}

func rehearsalPipeline(ranks []store.RankRecord, knobs map[string]string) *RehearsalPipeline {
	var p *RehearsalPipeline
	seen := map[int]bool{}
	for _, r := range ranks {
		if r.Info == nil || r.Info.Pipeline == nil {
			continue
		}
		pi := r.Info.Pipeline
		if p == nil {
			p = &RehearsalPipeline{Schedule: pi.Schedule, BalanceBy: pi.BalanceBy, Balance: pi.Balance}
			fmt.Sscan(knobs["pipeline.microbatches"], &p.Microbatches)
		}
		if !seen[pi.Stage] {
			seen[pi.Stage] = true
			p.Stages = append(p.Stages, fmt.Sprintf("stage %d: layers %d-%d", pi.Stage, pi.FirstLayer, pi.LastLayer-1))
		}
	}
	if p != nil {
		sort.Strings(p.Stages)
	}
	return p
}

func rehearsalChecksums(ranks []store.RankRecord, dp, stages int) *RehearsalChecksums {
	hash := func(r store.RankRecord) string {
		if r.Checksum == nil {
			return ""
		}
		return r.Checksum.Hash
	}
	c := &RehearsalChecksums{}
	if stages <= 1 {
		if len(ranks) < 2 {
			c.Detail = "one rank: nothing to compare"
			return c
		}
		eq := true
		for _, r := range ranks[1:] {
			if hash(r) == "" || hash(r) != hash(ranks[0]) {
				eq = false
				c.Detail = fmt.Sprintf("rank %d's parameters differ from rank 0's (%s vs %s)", r.Rank, hash(r), hash(ranks[0]))
				break
			}
		}
		if eq {
			c.Detail = fmt.Sprintf("all %d data-parallel ranks hold bit-identical parameters (%s)", len(ranks), hash(ranks[0]))
		}
		c.DataParallelEqual = &eq
		return c
	}
	if dp <= 1 {
		c.Detail = "one replica of each stage: nothing to compare"
		return c
	}
	eq := true
	c.Detail = fmt.Sprintf("the %d replicas of each of the %d stages hold bit-identical parameters", dp, stages)
	for s := 0; s < stages && eq; s++ {
		for d := 1; d < dp; d++ {
			k := d*stages + s
			if k >= len(ranks) || hash(ranks[k]) == "" || hash(ranks[k]) != hash(ranks[s]) {
				eq = false
				c.Detail = fmt.Sprintf("stage %d: replica %d (rank %d) differs from replica 0 (rank %d)", s, d, k, s)
				break
			}
		}
	}
	c.ReplicasEqual = &eq
	return c
}

func rehearsalLosses(ranks []store.RankRecord, info *store.RehearsalTrial, knobs map[string]string, dp int) *RehearsalLosses {
	l := &RehearsalLosses{Trial: store.MeanLosses(ranks)}
	ref := info.Reference
	switch {
	case len(ranks) < 2:
		l.Detail = "one rank: it is its own reference"
		return l
	case ref == nil:
		l.Detail = "no one-rank reference was run"
		return l
	case ref.Outcome != store.OK:
		return l // rehearseTrial says why
	}
	l.Reference = ref.Losses
	if c := knobs["ddp.compression"]; c != "" && c != "none" && info.Stages <= 1 {
		n := min(len(l.Trial), len(ref.Losses))
		for i := 0; i < n; i++ {
			l.MaxRel = max(l.MaxRel, rhRelDiff(l.Trial[i], ref.Losses[i]))
		}
		l.Detail = fmt.Sprintf("shown, not judged: compression %s changes the gradients by design (largest relative difference %.2g)", c, l.MaxRel)
		return l
	}
	if dp > 1 && familyHasBatchNorm(ranks) {
		l.Detail = "not comparable: BatchNorm normalises over each rank's micro-batch, the reference over the global batch"
		return l
	}
	n := min(len(l.Trial), len(ref.Losses))
	if n == 0 {
		l.Detail = "no measured steps to compare"
		return l
	}
	if why := stepsDiffer(ranks, ref, "the one-rank run"); why != "" {
		l.Detail, l.Agree = why, new(bool) // fails closed: the check did not run
		return l
	}
	for i := 0; i < n; i++ {
		l.MaxRel = max(l.MaxRel, rhRelDiff(l.Trial[i], ref.Losses[i]))
	}
	l.Tolerance = RehearsalFP32Tol
	what := "fp32: 1e-5 relative"
	if p := rankPrecision(ranks); p != "fp32" && atoiOr(knobs["tp.degree"], 1) > 1 {
		return tpTwinLosses(l, info, p, n)
	}
	if p := rankPrecision(ranks); p != "fp32" {
		noise := info.NoiseReference
		if noise == nil || noise.Outcome != store.OK || len(noise.Losses) < n {
			l.Detail = fmt.Sprintf("precision %s: no fp32 reference measured its noise, so the losses are shown, not judged", p)
			return l
		}
		if why := stepsDiffer(ranks, noise, "the fp32 one-rank run"); why != "" {
			l.Detail, l.Agree = why+": the bf16 noise is not measured", new(bool)
			return l
		}
		gap := 0.0
		for i := 0; i < n; i++ {
			gap = max(gap, rhRelDiff(ref.Losses[i], noise.Losses[i]))
		}
		l.Tolerance = max(RehearsalFP32Tol, rehearsalNoiseK*gap)
		what = fmt.Sprintf("%s: %g relative, twice the measured %s noise (the reference in %s against fp32: %.2g)", p, l.Tolerance, p, p, gap)
	}
	agree := l.MaxRel <= l.Tolerance
	l.Agree = &agree
	verb := "within"
	if !agree {
		verb = "outside"
	}
	l.Detail = fmt.Sprintf("the first %d steps follow one rank training the same global batch %s the tolerance (%s): largest relative difference %.2g",
		n, verb, what, l.MaxRel)
	return l
}

// tpTwinLosses judges a tensor-parallel trial in 16-bit by its fp32 twin
// (store.RehearsalTrial.TwinFP32): the twin's losses against one rank's in
// fp32 within 1e-5 (NoiseReference, the trial's global batch; or
// TwinReference, the twin's, when the twin ran at a smaller micro-batch
// because the trial's does not fit in fp32: the twin checks the layout's
// arithmetic, which does not depend on the micro-batch). The 16-bit trial's
// distance from its 16-bit reference is shown beside it, not judged: the
// partial sums of its row-parallel layers round in 16-bit where one rank's
// full sums do, a noise the one-rank runs do not measure (GPT-2 350M at tp 2
// on an H100: 1.0e-4 against a one-rank bf16-to-fp32 gap of 3e-5,
// gpu-check-2026-12-06f and -07b). A twin not run (it fits the device at no
// micro-batch), failed or without its one-rank fp32 run leaves the layout not
// checked, which fails closed: the one-rank bf16 noise is no criterion for
// it, so neither "ok" nor "DISAGREE" from it.
func tpTwinLosses(l *RehearsalLosses, info *store.RehearsalTrial, p string, n int) *RehearsalLosses {
	notChecked := func(why string) *RehearsalLosses {
		l.Detail = fmt.Sprintf("tensor parallel in %s: %s, so the layout is not checked (fails closed; in %s, shown, not judged: relative difference %.2g from one rank in %s, "+
			"row-parallel partial sums round in %s)", p, why, p, l.MaxRel, p, p)
		l.Agree, l.NotChecked = new(bool), true
		return l
	}
	twin, ref := info.TwinFP32, info.NoiseReference
	switch {
	case twin == nil:
		return notChecked("no fp32 twin was run (its one-rank fp32 run did not run or failed)")
	case twin.Outcome == store.Skipped:
		return notChecked(fmt.Sprintf("the fp32 twin was not run (%s)", rhFirstLine(twin.Error)))
	case twin.Outcome != store.OK:
		return notChecked(fmt.Sprintf("the fp32 twin failed (%s: %s)", twin.Outcome, rhFirstLine(twin.Error)))
	}
	at := ""
	if twin.MicroBatch != info.MicroBatch && twin.MicroBatch > 0 {
		ref = info.TwinReference
		at = fmt.Sprintf(" at micro-batch %d (the trial's %d does not fit in fp32; the layout's arithmetic does not depend on the micro-batch)",
			twin.MicroBatch, info.MicroBatch)
	}
	if ref == nil || ref.Outcome != store.OK {
		return notChecked("no fp32 one-rank run of the twin's global batch to compare the twin with")
	}
	m := min(n, len(twin.Losses), len(ref.Losses))
	for i := 0; i < m; i++ {
		if i < len(twin.Steps) && i < len(ref.Steps) && twin.Steps[i] != ref.Steps[i] {
			l.Detail, l.Agree = fmt.Sprintf("not comparable, so failed: the fp32 twin's step %d is step %d, the fp32 one-rank run's %d", i+1, twin.Steps[i], ref.Steps[i]), new(bool)
			return l
		}
	}
	if m == 0 {
		l.Detail, l.Agree = "the fp32 twin measured no step to compare, so failed", new(bool)
		return l
	}
	twinRel := 0.0
	for i := 0; i < m; i++ {
		twinRel = max(twinRel, rhRelDiff(twin.Losses[i], ref.Losses[i]))
	}
	l.Tolerance = RehearsalFP32Tol
	agree := twinRel <= l.Tolerance
	l.Agree = &agree
	verb := "within"
	if !agree {
		verb = "outside"
	}
	l.Detail = fmt.Sprintf("tensor parallel: the trial's layout in fp32%s follows one rank in fp32 %s 1e-5 relative over %d steps (largest relative difference %.2g); "+
		"in %s, shown, not judged: relative difference %.2g from one rank in %s (row-parallel partial sums round in %s)", at, verb, m, twinRel, p, l.MaxRel, p, p)
	return l
}

// stepsDiffer says why a one-rank launch's losses are not step for step the
// trial's: its measured steps are other steps (a warm-up of another length);
// "" when they are the same, or when the record has no step numbers.
func stepsDiffer(ranks []store.RankRecord, ref *store.RehearsalLaunch, what string) string {
	n := min(len(ranks[0].Steps), len(ref.Steps))
	for i := 0; i < n; i++ {
		if ranks[0].Steps[i].Step != ref.Steps[i] {
			return fmt.Sprintf("not comparable, so failed: the trial's measured step %d is step %d, %s's step %d (warm-ups of other lengths; every launch of a rehearsal must run the same steps)",
				i+1, ranks[0].Steps[i].Step, what, ref.Steps[i])
		}
	}
	return ""
}

func rhRelDiff(a, b float64) float64 {
	if b == 0 {
		return math.Abs(a)
	}
	return math.Abs(a-b) / math.Abs(b)
}

func rankPrecision(ranks []store.RankRecord) string {
	if ranks[0].Info != nil && ranks[0].Info.Precision != "" {
		return ranks[0].Info.Precision
	}
	return "fp32"
}

// familyHasBatchNorm: ResNet's BatchNorm makes data parallel differ from one
// rank on the global batch.
func familyHasBatchNorm(ranks []store.RankRecord) bool {
	i := ranks[0].Info
	return i != nil && strings.HasPrefix(i.Family, "resnet")
}

func rehearsalPaths(knobs map[string]string, b *RehearsalBuckets, stages int) []string {
	var out []string
	if b != nil {
		c := knobs["ddp.compression"]
		if c == "" {
			c = "none"
		}
		out = append(out, fmt.Sprintf("gradient buckets (%s, compression %s)", b.Ops, c))
		if strings.Contains(b.Ops, "all_gather") {
			out = append(out, "top-k all-gather")
		}
	}
	if stages > 1 {
		out = append(out, "pipeline stage exchanges")
	}
	if tp := atoiOr(knobs["tp.degree"], 1); tp > 1 {
		p := fmt.Sprintf("tensor-parallel layers over groups of %d ranks", tp)
		if knobs["tp.sequence_parallel"] == "true" {
			p += " with sequence parallelism"
		}
		out = append(out, p)
	}
	return out
}
