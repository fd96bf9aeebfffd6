package checklist

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// stepMetrics is one rank's measured step.
type stepMetrics = engine.StepMetrics

// trial is one trial record with the numbers the rules compare, taken from its
// summary (stats) and, where the summary lacks them, from the raw steps.
type trial struct {
	rec   *store.TrialRecord
	ID    string
	Knobs map[string]string

	Throughput float64 // samples/s: geometric mean over clean launches (the report's estimator)
	StepMS     float64 // median step time
	CommMS     float64
	ExposedMS  float64
	MFU        float64
	MemPeak    int64     // peak allocated, max over ranks, steps and repeats
	MemHeld    int64     // reserved by the caching allocator (a CUDA graph's pool included), max likewise; 0 = not recorded
	Loss       float64   // final loss; NaN when unknown
	Noise      float64   // launch-to-launch CV of the throughput
	launches   []float64 // samples/s of each clean launch: the replicates of every comparison
	World      int       // ranks of a repeat
	Measured   int       // rank 0's measured steps over ok repeats
	Skipped    int       // rank 0's skipped (fp16 overflow) steps

	// GatherWaitMS: ZeRO's wait for the parameters' all-gathers (median
	// step, part of ExposedMS); 0 without ZeRO or where not recorded.
	GatherWaitMS float64
}

// runView is a run prepared for the rules: trials parsed once, ok trials in
// plan order, and the run's baseline and objective.
type runView struct {
	run  *store.Run
	all  []*trial
	ok   []*trial
	byID map[string]*trial
	best *trial

	// level is what every comparison is decided at (the run's design and
	// compare.threshold); holm holds, per pair of trials that differ in one
	// knob, whether its test survives Holm's correction over all such pairs
	// (the checklist's faster/slower claims).
	level stats.Level
	holm  map[[2]string]bool

	// notRun are the planned trials without a record (the run stopped
	// before them: `casestudy run --resume` finishes them), in plan order;
	// dropped counts the records of combinations the planner dropped
	// (outcome skipped): not trials, and in no count of trials.
	notRun  []store.PlannedTrial
	dropped int
}

func newRunView(run *store.Run) *runView {
	v := &runView{run: run, byID: map[string]*trial{}}
	if run == nil {
		v.run = &store.Run{}
		return v
	}
	recs := make([]*store.TrialRecord, len(run.Trials))
	for i := range run.Trials {
		recs[i] = &run.Trials[i]
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
	for _, rec := range recs {
		t := newTrial(rec)
		v.all = append(v.all, t)
		v.byID[t.ID] = t
		if rec.Outcome == store.Skipped {
			v.dropped++
		}
		if rec.Outcome == store.OK && (t.Throughput > 0 || t.StepMS > 0) {
			v.ok = append(v.ok, t)
		}
	}
	v.notRun = run.Unrecorded() // as the report counts them (report.NotRun)
	v.best = v.pickBest(v.ok)
	threshold := run.Manifest.CompareThreshold
	if threshold <= 0 {
		threshold = defaultThreshold
	}
	v.level = measure.DesignOf(&run.Manifest).Level(threshold)
	v.holm = v.correct()
	return v
}

// trials returns the recorded trials, the dropped combinations (outcome
// skipped) left out: what counts of trials count.
func (v *runView) trials() []*trial {
	var out []*trial
	for _, t := range v.all {
		if t.rec.Outcome != store.Skipped {
			out = append(out, t)
		}
	}
	return out
}

// planned is the number of trials the run set out to measure: its recorded
// trials and the planned ones without a record.
func (v *runView) planned() int { return len(v.trials()) + len(v.notRun) }

// measuredOf is "N of M planned trial(s) measured" (completed with numbers),
// with the dropped combinations said apart.
func (v *runView) measuredOf() string {
	s := fmt.Sprintf("%d of %d planned trial(s) measured", len(v.ok), v.planned())
	if v.dropped > 0 {
		s += fmt.Sprintf("; %d combination(s) dropped before running, not counted", v.dropped)
	}
	return s
}

// defaultThreshold is δ when the study sets no compare.threshold (the
// report's DefaultThreshold).
const defaultThreshold = 0.05

// throughput is the metric of the checklist's speed comparisons.
var throughput = stats.Metrics["throughput"]

// correct runs Holm's procedure over every pair of ok trials that differ in
// exactly one knob: the family of comparisons the rules may claim.
func (v *runView) correct() map[[2]string]bool {
	var keys [][2]string
	var ps []float64
	seen := map[[2]string]bool{}
	for _, k := range v.varied() {
		for _, p := range v.pairs(k) {
			key := pairKey(p.A, p.B)
			if seen[key] {
				continue
			}
			seen[key] = true
			keys = append(keys, key)
			ps = append(ps, stats.Compare(p.A.launches, p.B.launches, throughput, v.level).P)
		}
	}
	out := map[[2]string]bool{}
	for i, rej := range stats.Holm(ps, 1-v.level.Confidence) {
		out[keys[i]] = rej
	}
	return out
}

func pairKey(a, b *trial) [2]string {
	if a.ID > b.ID {
		a, b = b, a
	}
	return [2]string{a.ID, b.ID}
}

// compare is alt against base by throughput over launches, its faster/slower
// verdict kept only when it survives Holm's correction.
func (v *runView) compare(alt, base *trial) stats.Comparison {
	c := stats.Compare(alt.launches, base.launches, throughput, v.level)
	return stats.Corrected(c, v.holm[pairKey(alt, base)])
}

func newTrial(rec *store.TrialRecord) *trial {
	t := &trial{rec: rec, ID: rec.ID, Knobs: rec.Knobs, Loss: math.NaN()}
	if t.Knobs == nil {
		t.Knobs = map[string]string{}
	}
	var steps, comm, exposed, gather, mfu []float64
	var lastLoss = math.NaN()
	if rec.Outcome == store.OK {
		t.launches = measure.TrialLaunches(rec, throughput).Values
	}
	for _, rp := range rec.Repeats {
		if (rp.Outcome != store.OK && rp.Outcome != "") || rp.Tainted != "" {
			continue
		}
		if len(rp.Ranks) > t.World {
			t.World = len(rp.Ranks)
		}
		for _, rk := range rp.Ranks {
			if rk.Info != nil && rk.Info.WorldSize > t.World {
				t.World = rk.Info.WorldSize
			}
			for _, s := range rk.Steps {
				t.MemPeak = max(t.MemPeak, s.MemPeakBytes)
				t.MemHeld = max(t.MemHeld, s.MemReservedBytes)
			}
		}
		r0 := rank0(rp)
		for _, s := range r0 {
			steps = append(steps, s.StepMS)
			comm = append(comm, s.CommMS)
			exposed = append(exposed, s.ExposedCommMS)
			gather = append(gather, s.GatherWaitMS)
			if s.MFU > 0 {
				mfu = append(mfu, s.MFU)
			}
			t.Measured++
			if s.Skipped {
				t.Skipped++
			}
		}
		if n := len(r0); n > 0 && r0[n-1].Loss != 0 { // 0: not recorded
			lastLoss = r0[n-1].Loss
		}
	}
	t.Loss = lastLoss
	// The stored summary (measure.SummarizeTrial) has the medians and the noise; the
	// raw steps are summarised only for what it lacks (or when it is absent).
	s := rec.Summary
	if s == nil {
		s = &store.TrialSummary{}
	}
	pick := func(stored float64, raw []float64) float64 {
		if stored > 0 {
			return stored
		}
		return median(raw)
	}
	if len(t.launches) > 0 {
		t.Throughput = stats.ValueOf(t.launches, 0.95).Center
	} else {
		t.Throughput = s.SamplesPerS
	}
	t.StepMS = pick(s.StepMSMedian, steps)
	t.CommMS, t.ExposedMS, t.MFU = pick(s.CommMS, comm), pick(s.ExposedCommMS, exposed), pick(s.MFU, mfu)
	t.GatherWaitMS = pick(s.GatherWaitMS, gather)
	if s.FinalLoss != 0 && !math.IsNaN(s.FinalLoss) {
		t.Loss = s.FinalLoss
	}
	t.Noise = cv(t.launches)
	t.MemPeak = max(t.MemPeak, s.MemPeakBytes)
	t.Skipped = max(t.Skipped, s.SkippedSteps)
	return t
}

// rank0 returns the measured steps of the repeat's rank 0.
func rank0(rp store.RepeatRecord) []engine.StepMetrics {
	for _, rk := range rp.Ranks {
		if rk.Rank == 0 {
			return rk.Steps
		}
	}
	if len(rp.Ranks) > 0 {
		return rp.Ranks[0].Steps
	}
	return nil
}

// okRepeats returns the repeats that finished.
func (t *trial) okRepeats() []store.RepeatRecord {
	var out []store.RepeatRecord
	for _, rp := range t.rec.Repeats {
		if rp.Outcome == store.OK || rp.Outcome == "" {
			out = append(out, rp)
		}
	}
	return out
}

// knob returns the trial's value of a knob ("" when the record lacks it).
func (t *trial) knob(name string) string { return t.Knobs[name] }

// knobInt parses an integer knob; def when absent or not a number.
func (t *trial) knobInt(name string, def int) int {
	if n, err := strconv.Atoi(t.Knobs[name]); err == nil {
		return n
	}
	return def
}

// knobFloat parses a number knob; def when absent or not a number.
func (t *trial) knobFloat(name string, def float64) float64 {
	if f, err := strconv.ParseFloat(t.Knobs[name], 64); err == nil {
		return f
	}
	return def
}

// label is "ID (knob=value, ...)" with the knobs that differ from the baseline.
func (t *trial) label() string {
	if len(t.rec.Changed) == 0 {
		return t.ID + " (baseline)"
	}
	return t.ID + " (" + knobs.Join(t.Knobs, t.rec.Changed, ", ") + ")"
}

// stages is the pipeline depth (1 without a pipeline).
func (t *trial) stages() int { return max(1, t.knobInt("pipeline.stages", 1)) }

// dataParallel is the number of data-parallel replicas: the ranks /
// (tp.degree x pipeline stages).
func (t *trial) dataParallel() int { return knobs.LayoutOf(t.Knobs, t.World).DP }

// tensorParallel is the tensor-parallel degree (1 without tp).
func (t *trial) tensorParallel() int { return max(1, t.knobInt("tp.degree", 1)) }

// steps returns every measured step of every rank of every ok repeat.
func (t *trial) steps(fn func(rank int, s engine.StepMetrics)) {
	for _, rp := range t.okRepeats() {
		for _, rk := range rp.Ranks {
			for _, s := range rk.Steps {
				fn(rk.Rank, s)
			}
		}
	}
}

// speedup is how much faster a is than b (>1: a is faster): the ratio of
// geometric-mean throughputs, or of step times when a throughput is missing.
func speedup(a, b *trial) float64 {
	if a.Throughput > 0 && b.Throughput > 0 {
		return a.Throughput / b.Throughput
	}
	if a.StepMS > 0 && b.StepMS > 0 {
		return b.StepMS / a.StepMS
	}
	return math.NaN()
}

// pair is two ok trials whose knobs differ in exactly one knob.
type pair struct {
	Knob string
	A, B *trial
}

// pairs returns the pairs of ok trials that differ only in knob, in plan
// order: within each group of trials equal in every other knob, each trial
// against the group's references (the trials that hold the knob's baseline
// value, "false" or "auto": what the rules compare against), or against the
// group's first trial when it holds none. A star, not every pair: a sweep of
// n values of one knob gives n-1 pairs rather than n(n-1)/2, which at 20,000
// trials is the difference between a few MB and tens of GB (audit N3).
func (v *runView) pairs(knob string) []pair {
	var out []pair
	v.groups(knob, func(g []*trial) {
		refs := v.references(knob, g)
		isRef := map[*trial]bool{}
		for _, r := range refs {
			isRef[r] = true
		}
		for _, r := range refs {
			for _, t := range g {
				if t == r || r.knob(knob) == t.knob(knob) || (isRef[t] && t.rec.Index < r.rec.Index) {
					continue // the same value, or a pair of references already made
				}
				a, b := r, t
				if b.rec.Index < a.rec.Index {
					a, b = b, a
				}
				out = append(out, pair{Knob: knob, A: a, B: b})
			}
		}
	})
	return out
}

// groups calls fn with each group of ok trials that hold knob and are equal
// in every other knob, in plan order, skipping groups of a single value.
func (v *runView) groups(knob string, fn func([]*trial)) {
	groups := map[string][]*trial{}
	var order []string
	for _, t := range v.ok {
		if _, has := t.Knobs[knob]; !has {
			continue
		}
		k := otherKnobsKey(t.Knobs, knob)
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	for _, k := range order {
		g := groups[k]
		for _, t := range g[1:] {
			if t.knob(knob) != g[0].knob(knob) {
				fn(g)
				break
			}
		}
	}
}

// references are the trials of a group the others are compared with: those
// holding the knob's baseline value, "false" or "auto"; else the first.
func (v *runView) references(knob string, g []*trial) []*trial {
	base := v.baseline(knob)
	var refs []*trial
	for _, t := range g {
		if val := t.knob(knob); val == base || val == "false" || val == "auto" {
			refs = append(refs, t)
		}
	}
	if len(refs) == 0 {
		refs = g[:1]
	}
	return refs
}

// varied returns the knobs for which at least one pair exists, sorted.
func (v *runView) varied() []string {
	seen := map[string]bool{}
	for _, t := range v.ok {
		for k := range t.Knobs {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		found := false
		v.groups(k, func([]*trial) { found = true })
		if found {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func otherKnobsKey(knobs map[string]string, except ...string) string {
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		if !slices.Contains(except, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(knobs[k])
		b.WriteByte(0)
	}
	return b.String()
}

// baseline returns the baseline's value of a knob: the study's baseline, else
// the baseline trial's (no knob changed), else the knob registry's default.
func (v *runView) baseline(knob string) string {
	if val, ok := v.run.Manifest.Baseline[knob]; ok {
		return val
	}
	for _, t := range v.all {
		if len(t.rec.Changed) == 0 {
			if val, ok := t.Knobs[knob]; ok {
				return val
			}
		}
	}
	if k, ok := knobs.Lookup(knob); ok {
		return k.Default
	}
	return ""
}

// pickBest returns the best of ts by the study's objective (measure.Best, the
// definition the report and greedy search use); nil for none.
func (v *runView) pickBest(ts []*trial) *trial {
	metric, _ := measure.MetricFor(v.run.Manifest.Objective)
	recs := make([]*store.TrialRecord, len(ts))
	for i, t := range ts {
		recs[i] = t.rec
	}
	if i := measure.Best(recs, metric); i >= 0 {
		return ts[i]
	}
	return nil
}

// gpuMemBytes is the smallest GPU memory of the host (0 when no GPU is known).
func (v *runView) gpuMemBytes() uint64 {
	var m uint64
	for _, g := range v.run.Manifest.Host.GPUs {
		if g.MemBytes > 0 && (m == 0 || g.MemBytes < m) {
			m = g.MemBytes
		}
	}
	return m
}

// onGPU reports whether the run's trials ran on GPUs.
func (v *runView) onGPU() bool {
	for _, t := range v.all {
		for _, rp := range t.rec.Repeats {
			for _, rk := range rp.Ranks {
				if rk.Info != nil && rk.Info.Device != "" {
					return strings.HasPrefix(rk.Info.Device, "cuda")
				}
			}
		}
	}
	if d, ok := v.run.Manifest.Workload["device_resolved"].(string); ok && d != "" {
		return strings.HasPrefix(d, "cuda")
	}
	return len(v.run.Manifest.Host.GPUs) > 0
}

// median and cv are stats.DescribeOf's median and coefficient of variation
// (0 for an empty sample; cv 0 for fewer than two values).
func median(xs []float64) float64 { return stats.DescribeOf(xs).Median }

func cv(xs []float64) float64 { return stats.DescribeOf(xs).CV }
