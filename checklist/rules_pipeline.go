package checklist

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// Pipeline rules: bubble and schedule memory.

var pipelineRules = []*Rule{
	{
		ID: "pipeline-bubble", Title: "Pipeline bubble above theory or too few micro-batches", Chapter: 13, Severity: Warning,
		Rationale: "With p stages and m micro-batches the schedule idles (p−1)/(m+p−1) of the time; m ≥ 4p keeps it " +
			"under ~20%. A measured bubble well above that theory means unbalanced stages or slow stage-to-stage " +
			"transfers. Judged on the best pipeline trial.",
		Needs: []string{"knobs pipeline.stages, pipeline.microbatches", "steps[].stages (bubble_fraction, theory_bubble, busy_ms)"},
		Thresholds: []Threshold{
			{Name: "microbatch_factor", Default: 4, Unit: "x stages", Doc: "micro-batches per stage the schedule should have at least"},
			{Name: "max_excess", Default: 0.10, Unit: "fraction", Doc: "measured bubble may exceed theory by this much (absolute)"},
		},
		check: checkPipelineBubble,
	},
	{
		ID: "pipeline-schedule-memory", Title: "GPipe activation memory near the limit", Chapter: 12, Severity: Warning,
		Rationale: "GPipe runs all m forward micro-batches before any backward, so each stage holds m micro-batches' " +
			"activations; 1F1B holds at most p. When GPipe trials run near the GPU's memory (or run out of it), " +
			"1F1B gives the same bubble with far less activation memory.",
		Needs:      []string{"knob pipeline.schedule", "mem_peak_bytes", "GPU memory", "stages[].act_peak_bytes", "oom outcomes"},
		Thresholds: []Threshold{{Name: "near_limit", Default: 0.80, Unit: "fraction", Doc: "peak memory share of the GPU that counts as near the limit"}},
		check:      checkScheduleMemory,
	},
}

// stageStats is the median bubble of each pipeline stage over a trial's steps.
type stageStats struct {
	Stage          int
	Bubble, Theory float64
	BusyMS         float64
	ActPeak        int64
}

func (t *trial) stageStats() []stageStats {
	bub, th, busy := map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
	act := map[int]int64{}
	t.steps(func(_ int, s stepMetrics) {
		for _, st := range s.Stages {
			bub[st.Stage] = append(bub[st.Stage], st.BubbleFraction)
			th[st.Stage] = append(th[st.Stage], st.TheoryBubble)
			busy[st.Stage] = append(busy[st.Stage], st.BusyMS)
			act[st.Stage] = max(act[st.Stage], st.ActPeakBytes)
		}
	})
	var out []stageStats
	for s := range bub {
		out = append(out, stageStats{Stage: s, Bubble: median(bub[s]), Theory: median(th[s]), BusyMS: median(busy[s]), ActPeak: act[s]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stage < out[j].Stage })
	return out
}

func (v *runView) pipelineTrials() []*trial {
	var out []*trial
	for _, t := range v.ok {
		if t.stages() > 1 {
			out = append(out, t)
		}
	}
	return out
}

func checkPipelineBubble(c *evalContext) verdict {
	pp := c.run.pipelineTrials()
	if len(pp) == 0 {
		return na("no completed pipeline trial (pipeline.stages > 1)")
	}
	t := c.run.pickBest(pp)
	if t == nil {
		t = pp[0]
	}
	p, m := t.stages(), t.knobInt("pipeline.microbatches", 1)
	theory := float64(p-1) / float64(m+p-1)
	var msgs, recs, evidence []string
	if want := int(math.Ceil(c.t("microbatch_factor") * float64(p))); m < want {
		msgs = append(msgs, fmt.Sprintf("%d micro-batches for %d stages (theory bubble (p−1)/(m+p−1) = %s)", m, p, pct(theory)))
		recs = append(recs, fmt.Sprintf("use pipeline.microbatches: %d or more (≥ %s × stages), with a smaller micro_batch to keep the global batch", want, num(c.t("microbatch_factor"))))
	}
	stats := t.stageStats()
	worst := -1
	for i, s := range stats {
		if s.Theory == 0 {
			stats[i].Theory = theory
		}
		evidence = append(evidence, fmt.Sprintf("stage %d: bubble %s (theory %s), busy %s, activation peak %s",
			s.Stage, pct(s.Bubble), pct(stats[i].Theory), ms(s.BusyMS), gib(float64(s.ActPeak))))
		if worst < 0 || s.Bubble-stats[i].Theory > stats[worst].Bubble-stats[worst].Theory {
			worst = i
		}
	}
	if worst >= 0 {
		if w := stats[worst]; w.Bubble-w.Theory > c.t("max_excess") {
			msgs = append(msgs, fmt.Sprintf("stage %d idles %s of the step against a theory of %s", w.Stage, pct(w.Bubble), pct(w.Theory)))
			recs = append(recs, "balance the stages (pipeline.balance: time splits by measured layer times; or give the busiest stage fewer layers) and check stage-to-stage transfer time")
		}
	}
	if len(msgs) == 0 {
		if len(stats) == 0 {
			return pass("the best pipeline trial %s has %d micro-batches for %d stages (stage bubbles not recorded)", t.ID, m, p)
		}
		return pass("the best pipeline trial %s: %d micro-batches for %d stages, bubbles within %s of theory", t.ID, m, p, pct(c.t("max_excess")))
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("the best pipeline trial %s has %s", t.ID, strings.Join(msgs, "; ")),
		Evidence:       evidence,
		Trials:         ids(t),
		Recommendation: strings.Join(recs, "; "),
	}
}

func checkScheduleMemory(c *evalContext) verdict {
	var gpipeOK, gpipeOOM []*trial
	for _, t := range c.run.all {
		if t.stages() <= 1 || t.knob("pipeline.schedule") != "gpipe" {
			continue
		}
		switch t.rec.Outcome {
		case store.OK:
			gpipeOK = append(gpipeOK, t)
		case store.OOM:
			gpipeOOM = append(gpipeOOM, t)
		}
	}
	if len(gpipeOK)+len(gpipeOOM) == 0 {
		return na("no GPipe pipeline trial (pipeline.schedule: gpipe with pipeline.stages > 1)")
	}
	capacity := float64(c.run.gpuMemBytes())
	var evidence, trials []string
	for _, t := range gpipeOOM {
		line := fmt.Sprintf("%s ran out of memory", t.label())
		if tw := c.run.twin(t, "pipeline.schedule", "1f1b"); tw != nil {
			line += fmt.Sprintf("; with 1f1b (%s) it ended %s", tw.ID, tw.rec.Outcome)
			trials = append(trials, tw.ID)
		}
		evidence = append(evidence, line)
		trials = append(trials, t.ID)
	}
	if capacity == 0 && len(gpipeOOM) == 0 {
		return na("no GPU memory capacity in the manifest (CPU run): nothing to be near")
	}
	worst := 0.0
	for _, t := range gpipeOK {
		if capacity == 0 || t.MemPeak == 0 {
			continue
		}
		frac := float64(t.MemPeak) / capacity
		worst = math.Max(worst, frac)
		if frac < c.t("near_limit") {
			continue
		}
		line := fmt.Sprintf("%s peaked at %s, %s of %s", t.label(), gib(float64(t.MemPeak)), pct(frac), gib(capacity))
		if tw := c.run.twin(t, "pipeline.schedule", "1f1b"); tw != nil && tw.rec.Outcome == store.OK && tw.MemPeak > 0 {
			line += fmt.Sprintf("; 1F1B (%s) peaked at %s", tw.ID, gib(float64(tw.MemPeak)))
			trials = append(trials, tw.ID)
		}
		evidence = append(evidence, line)
		trials = append(trials, t.ID)
	}
	if len(evidence) == 0 {
		if capacity == 0 {
			return na("no GPU memory capacity in the manifest (CPU run)")
		}
		return pass("GPipe trials peaked at most at %s of GPU memory (limit %s)", pct(worst), pct(c.t("near_limit")))
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("%d GPipe trial(s) ran out of or near the GPU's memory: %s", len(evidence), evidence[0]),
		Evidence:       limit(evidence, 8),
		Trials:         trials,
		Recommendation: "use pipeline.schedule: 1f1b (at most `stages` micro-batches of activations in flight instead of all of them)",
	}
}

// twin returns the trial (any outcome) whose knobs equal t's except knob=value.
func (v *runView) twin(t *trial, knob, value string) *trial {
	return v.twinAtBatch(t, knob, value, nil)
}

// twinAtBatch is twin where the knobs in free may differ too, as long as the
// global batch (micro_batch x data-parallel ranks) is the same: a study that
// trades data-parallel ranks for tensor-parallel ones at a fixed global batch
// (studies/gpt/tp.yaml) changes micro_batch with tp.degree.
func (v *runView) twinAtBatch(t *trial, knob, value string, free []string) *trial {
	except := append([]string{knob}, free...)
	key := otherKnobsKey(t.Knobs, except...)
	batch := func(x *trial) int { return x.knobInt("micro_batch", 0) * x.dataParallel() }
	for _, o := range v.all {
		if o != t && o.knob(knob) == value && otherKnobsKey(o.Knobs, except...) == key && (len(free) == 0 || batch(o) == batch(t)) {
			return o
		}
	}
	return nil
}
