package checklist

import (
	"fmt"
	"math"
	"strconv"

	"github.com/casestudy/casestudy/stats"
)

// Communication rules: bucket size, exposed communication, overlap, forced
// NCCL algorithm/protocol.

var commRules = []*Rule{
	{
		ID: "bucket-size", Title: "Gradient bucket size", Chapter: 16, Severity: Warning,
		Rationale: "Small buckets mean many small all-reduces that run at a fraction of the link's bandwidth " +
			"(latency-bound); one huge bucket cannot start before the backward pass ends, so its communication " +
			"is exposed. Judged from a ddp.bucket_mb pair when swept, else from the best trial's buckets.",
		Needs: []string{"knob ddp.bucket_mb", "steps[].buckets (bytes, busbw)", "exposed_comm_ms", "samples_per_s"},
		Thresholds: []Threshold{
			{Name: "min_speedup", Default: 1.05, Unit: "x", Doc: "speed-up over the baseline's bucket size that makes a recommendation (beyond noise too)"},
			{Name: "max_buckets_per_step", Default: 40, Unit: "count", Doc: "more all-reduces per step than this are many small collectives"},
			{Name: "low_busbw_frac", Default: 0.5, Unit: "fraction", Doc: "bucket busbw below this share of the run's best busbw is low"},
			{Name: "max_exposed_frac", Default: 0.15, Unit: "fraction", Doc: "exposed communication share of the step that makes one bucket too large"},
		},
		check: checkBucketSize,
	},
	{
		ID: "exposed-comm", Title: "Exposed communication share of the step", Chapter: 15, Severity: Warning,
		Rationale: "Gradient all-reduce overlapped with the backward pass costs nothing; the part that is not hidden " +
			"adds straight to the step time. Judged on the best data-parallel trial.",
		Needs:      []string{"exposed_comm_ms", "comm_ms", "step_ms", "world size > 1"},
		Thresholds: []Threshold{{Name: "max_exposed_frac", Default: 0.15, Unit: "fraction", Doc: "largest exposed-communication share of the step time"}},
		check:      checkExposedComm,
	},
	{
		ID: "overlap-disabled", Title: "Communication overlap disabled", Chapter: 15, Severity: Warning,
		Rationale: "With ddp.overlap: false every gradient is all-reduced after the backward pass, so all " +
			"communication is exposed. Overlap is the default for a reason; turn it off only when measured faster.",
		Needs: []string{"knob ddp.overlap", "world size > 1", "samples_per_s", "exposed_comm_ms"},
		check: checkOverlap,
	},
	{
		ID: "nccl-forced", Title: "NCCL algorithm or protocol forced", Chapter: 6, Severity: Warning,
		Rationale: "NCCL's tuner picks an algorithm (Ring, Tree, NVLS, ...) and protocol (LL, LL128, Simple) per " +
			"message size and topology. Forcing one (NCCL_ALGO, NCCL_PROTO) can be slower, and a forced choice " +
			"that is faster for this message size may be slower for others.",
		Needs: []string{"knobs nccl.algo, nccl.proto", "a pair of trials forced vs auto", "samples_per_s", "buckets"},
		Thresholds: []Threshold{
			{Name: "min_speedup", Default: 1.03, Unit: "x", Doc: "speed-up of a forced value over auto worth mentioning"},
		},
		check: checkNCCLForced,
	},
}

// bucketStats summarises the all-reduce buckets of rank 0's measured steps.
type bucketStats struct {
	PerStep     float64 // median buckets per step
	MedianBytes float64
	MedianBusBW float64 // median over buckets
	MaxBusBW    float64
}

func (t *trial) buckets() bucketStats {
	var per, bytes, bw []float64
	var st bucketStats
	for _, rp := range t.okRepeats() {
		for _, s := range rank0(rp) {
			if len(s.Buckets) == 0 {
				continue
			}
			per = append(per, float64(len(s.Buckets)))
			for _, b := range s.Buckets {
				bytes = append(bytes, float64(b.Bytes))
				if b.BusBW() > 0 { // without the ranks' arrival skew where the runner split it
					bw = append(bw, b.BusBW())
					st.MaxBusBW = math.Max(st.MaxBusBW, b.BusBW())
				}
			}
		}
	}
	st.PerStep, st.MedianBytes, st.MedianBusBW = median(per), median(bytes), median(bw)
	return st
}

// dataParallel returns the ok trials with more than one data-parallel replica
// whose gradients go through the bucketed reducer: the bucket, overlap and
// bus-bandwidth rules judge those. A tensor-parallel trial averages its
// gradients over the data group in one flat all-reduce, with no buckets
// (docs/tensor-parallel.md), so it is left out.
func (v *runView) dataParallel() []*trial {
	var out []*trial
	for _, t := range v.ok {
		if t.dataParallel() > 1 && t.tensorParallel() == 1 {
			out = append(out, t)
		}
	}
	return out
}

func bucketLine(t *trial) string {
	b := t.buckets()
	return fmt.Sprintf("%s: %.0f all-reduces per step, median bucket %s at %s bus bandwidth, exposed comm %s of %s",
		t.label(), b.PerStep, gib(b.MedianBytes), gbs(b.MedianBusBW), ms(t.ExposedMS), ms(t.StepMS))
}

func checkBucketSize(c *evalContext) verdict {
	dp := c.run.dataParallel()
	if len(dp) == 0 {
		return na("no completed data-parallel trial (one replica has no gradient all-reduce)")
	}
	base := c.run.baseline("ddp.bucket_mb")
	if comps := c.run.against("ddp.bucket_mb", base); len(comps) > 0 {
		b, top := winner(comps, c.t("min_speedup"))
		if top == nil {
			return na("the ddp.bucket_mb pairs have no throughput or step time")
		}
		if b == nil {
			return pass("no bucket size beat the baseline's %s MB by %s beyond noise (best: %s MB at %s, trials %s, %s)",
				base, x(c.t("min_speedup")), top.Alt.knob("ddp.bucket_mb"), x(top.Speedup), top.Alt.ID, top.Base.ID)
		}
		altMB, baseMB := b.Alt.knobFloat("ddp.bucket_mb", 0), b.Base.knobFloat("ddp.bucket_mb", 0)
		why := "too large: its communication waits for the end of the backward pass"
		if altMB > baseMB {
			why = "too small: many small all-reduces run below the link's bandwidth"
		}
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("ddp.bucket_mb: %s was %s faster than the baseline's %s (trials %s, %s): the baseline's buckets are %s",
				num(altMB), x(b.Speedup), num(baseMB), b.Alt.ID, b.Base.ID, why),
			Evidence:       []string{bucketLine(b.Alt), bucketLine(b.Base)},
			Trials:         ids(b.Alt, b.Base),
			Recommendation: "use ddp.bucket_mb: " + num(altMB),
		}
	}
	t := c.run.pickBest(dp)
	if t == nil {
		return na("no data-parallel trial has a throughput")
	}
	bs := t.buckets()
	if bs.PerStep == 0 {
		return na("the best data-parallel trial %s recorded no per-bucket metrics", t.ID)
	}
	runMax := 0.0
	for _, o := range dp {
		runMax = math.Max(runMax, o.buckets().MaxBusBW)
	}
	mb := t.knob("ddp.bucket_mb")
	if bs.PerStep > c.t("max_buckets_per_step") && runMax > 0 && bs.MedianBusBW < c.t("low_busbw_frac")*runMax {
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("the best data-parallel trial %s runs %.0f all-reduces per step at a median %s bus bandwidth, %s of the run's best %s: its %s MB buckets are too small",
				t.ID, bs.PerStep, gbs(bs.MedianBusBW), pct(bs.MedianBusBW/runMax), gbs(runMax), mb),
			Evidence:       []string{bucketLine(t)},
			Trials:         ids(t),
			Recommendation: "raise ddp.bucket_mb (sweep e.g. [25, 50, 100]) to aggregate small messages",
		}
	}
	if bs.PerStep <= 1 && t.StepMS > 0 && t.ExposedMS/t.StepMS > c.t("max_exposed_frac") {
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("the best data-parallel trial %s all-reduces one bucket per step and %s of the step (%s) is exposed communication: one bucket cannot overlap the backward pass",
				t.ID, pct(t.ExposedMS/t.StepMS), ms(t.ExposedMS)),
			Evidence:       []string{bucketLine(t)},
			Trials:         ids(t),
			Recommendation: fmt.Sprintf("lower ddp.bucket_mb below %s MB so buckets start during the backward pass", mb),
		}
	}
	return pass("the best data-parallel trial %s runs %.0f all-reduces per step at a median %s: bucket size looks right",
		t.ID, bs.PerStep, gbs(bs.MedianBusBW))
}

func checkExposedComm(c *evalContext) verdict {
	var withComm []*trial
	for _, t := range c.run.dataParallel() {
		if t.CommMS > 0 && t.StepMS > 0 {
			withComm = append(withComm, t)
		}
	}
	if len(withComm) == 0 {
		return na("no completed data-parallel trial measured its communication time")
	}
	t := c.run.pickBest(withComm)
	if t == nil {
		t = withComm[0]
	}
	frac := t.ExposedMS / t.StepMS
	hidden := 0.0
	if t.CommMS > 0 {
		hidden = 1 - math.Min(1, t.ExposedMS/t.CommMS)
	}
	if frac <= c.t("max_exposed_frac") {
		return pass("the best data-parallel trial %s exposes %s of its %s step (%s of %s communication hidden)",
			t.ID, pct(frac), ms(t.StepMS), pct(hidden), ms(t.CommMS))
	}
	rec := "overlap more: tune ddp.bucket_mb and ddp.first_bucket_mb, try ddp.compression: bf16, and check the topology and bus bandwidth rules"
	if t.knob("ddp.overlap") == "false" {
		rec = "use ddp.overlap: true; then tune ddp.bucket_mb"
	}
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("%s of the best data-parallel trial's step is exposed communication (%s of %s; %s of %s communication hidden, trial %s)",
			pct(frac), ms(t.ExposedMS), ms(t.StepMS), pct(hidden), ms(t.CommMS), t.ID),
		Evidence:       []string{bucketLine(t)},
		Trials:         ids(t),
		Recommendation: rec,
	}
}

func checkOverlap(c *evalContext) verdict {
	dp := c.run.dataParallel()
	if len(dp) == 0 {
		return na("no completed data-parallel trial (one replica has no gradient all-reduce)")
	}
	return checkOverlapOff(c, dp, overlapOff{
		knob:   "ddp.overlap",
		passOn: "ddp.overlap is on in the baseline and the best data-parallel trial",
		off:    "ddp.overlap is false (baseline %q, best trial %s): gradients are all-reduced after the backward pass, exposing %s of a %s step",
		better: "overlap on was %s faster than off (trials %s, %s), yet the baseline or best trial runs with ddp.overlap: false",
		worse:  "overlap off was measured faster (%s, trials %s, %s): keeping it off is justified",
		judged: "overlap on against off: %s",
		evidence: func(b comparison) []string {
			return []string{verdictNote(b), bucketLine(b.Alt), bucketLine(b.Base)}
		},
	})
}

// overlapOff is a knob whose false exposes communication the default hides
// (ddp.overlap, zero.overlap_gather), with the words checkOverlapOff uses.
type overlapOff struct {
	knob   string
	passOn string // on in the baseline and the best trial
	off    string // no measured twin: baseline value, trial, exposed ms, step ms
	better string // on measured faster: speedup, on trial, off trial
	worse  string // off measured faster: speedup, off trial, on trial
	judged string // neither: the comparison's note
	// evidence of the better case
	evidence func(comparison) []string
	// exposed is what off's "exposing %s" names: the trial's communication
	// the knob would hide (nil: all its exposed communication, ExposedMS).
	exposed func(*trial) string
}

// checkOverlapOff: a finding when the baseline or the best of trials runs
// with o.knob false, unless its twin with o.knob true was measured slower.
func checkOverlapOff(c *evalContext, trials []*trial, o overlapOff) verdict {
	best := c.run.pickBest(trials)
	base := c.run.baseline(o.knob)
	if base != "false" && (best == nil || best.knob(o.knob) != "false") {
		return pass("%s", o.passOn)
	}
	b := fastest(c.run.against(o.knob, "false"))
	if b == nil {
		t := best
		if t == nil {
			t = trials[0]
		}
		exposed := ms(t.ExposedMS)
		if o.exposed != nil {
			exposed = o.exposed(t)
		}
		return verdict{
			Status:         Finding,
			Message:        fmt.Sprintf(o.off, base, t.ID, exposed, ms(t.StepMS)),
			Trials:         ids(t),
			Recommendation: fmt.Sprintf("use %s: true (or sweep %s: [true, false] to measure it)", o.knob, o.knob),
		}
	}
	switch measured(*b) {
	case stats.Better:
		return verdict{
			Status:         Finding,
			Message:        fmt.Sprintf(o.better, x(b.Speedup), b.Alt.ID, b.Base.ID),
			Evidence:       o.evidence(*b),
			Trials:         ids(b.Alt, b.Base),
			Recommendation: fmt.Sprintf("use %s: true", o.knob),
		}
	case stats.Worse:
		return pass(o.worse, x(1/b.Speedup), b.Base.ID, b.Alt.ID)
	}
	return pass(o.judged, verdictNote(*b))
}

var ncclEnv = map[string]string{"nccl.algo": "NCCL_ALGO", "nccl.proto": "NCCL_PROTO"}

func checkNCCLForced(c *evalContext) verdict {
	var slowerInUse, faster, all []comparison
	for _, knob := range []string{"nccl.algo", "nccl.proto"} {
		inUse := map[string]bool{c.run.baseline(knob): true}
		if c.run.best != nil {
			inUse[c.run.best.knob(knob)] = true
		}
		for _, cmp := range c.run.against(knob, "auto") {
			if math.IsNaN(cmp.Speedup) {
				continue
			}
			all = append(all, cmp)
			switch {
			case measured(cmp) == stats.Worse && inUse[cmp.Alt.knob(knob)]:
				slowerInUse = append(slowerInUse, cmp)
			case measured(cmp) == stats.Better && cmp.Speedup >= c.t("min_speedup"):
				faster = append(faster, cmp)
			}
		}
	}
	if len(all) == 0 {
		return na("no completed trial forcing nccl.algo or nccl.proto differs from an auto trial only in that knob")
	}
	knobOf := func(cmp comparison) string {
		if cmp.Alt.knob("nccl.algo") != cmp.Base.knob("nccl.algo") {
			return "nccl.algo"
		}
		return "nccl.proto"
	}
	if len(slowerInUse) > 0 {
		s := slowerInUse[0]
		for _, o := range slowerInUse {
			if o.Speedup < s.Speedup {
				s = o
			}
		}
		k := knobOf(s)
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("forcing %s=%s was %s slower than auto (trials %s, %s), and the baseline or best trial forces it",
				ncclEnv[k], s.Alt.knob(k), x(1/s.Speedup), s.Alt.ID, s.Base.ID),
			Evidence:       []string{verdictNote(s), messageSize(s.Alt), messageSize(s.Base)},
			Trials:         ids(s.Alt, s.Base),
			Recommendation: fmt.Sprintf("leave %s: auto", k),
		}
	}
	if b := fastest(faster); b != nil {
		k := knobOf(*b)
		evidence := []string{verdictNote(*b), messageSize(b.Alt), messageSize(b.Base)}
		if ch := c.run.ncclChoices(b.Base); ch != nil {
			evidence = append(evidence, fmt.Sprintf("with auto, NCCL chose %s for %d all-reduces (rank 0's log of %s)", ch, ch.N, b.Base.ID))
		}
		return verdict{
			Status:   Finding,
			Severity: Info,
			Message: fmt.Sprintf("forcing %s=%s was %s faster than auto (trials %s, %s) at this message size",
				ncclEnv[k], b.Alt.knob(k), x(b.Speedup), b.Alt.ID, b.Base.ID),
			Evidence: evidence,
			Trials:   ids(b.Alt, b.Base),
			Recommendation: fmt.Sprintf("%s: %s helps this configuration; NCCL's tuner chooses per message size, rank count and topology, "+
				"so re-measure it before keeping it when the bucket size, model, GPU count or node count changes", k, b.Alt.knob(k)),
		}
	}
	return pass("%d forced-vs-auto pair(s): none forced value in use was slower than auto, none was faster by %s",
		len(all), x(c.t("min_speedup")))
}

// messageSize describes the all-reduce sizes a trial's NCCL choice applied to.
func messageSize(t *trial) string {
	b := t.buckets()
	size := "bucket sizes not recorded"
	if b.MedianBytes > 0 {
		size = "median bucket " + gib(b.MedianBytes)
	}
	return fmt.Sprintf("%s: %s over %s ranks, %.4g samples/s", t.label(), size, strconv.Itoa(t.World), t.Throughput)
}
