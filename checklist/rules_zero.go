package checklist

import (
	"fmt"

	"github.com/casestudy/casestudy/store"
)

// ZeRO rules: sharding where memory, not time, is the limit.

var zeroRules = []*Rule{
	{
		ID: "zero-memory-not-time", Title: "ZeRO where memory is not the limit", Chapter: 22, Severity: Warning,
		Rationale: "ZeRO divides the optimizer states (zero.stage 1) and the gradients (2) by the data-parallel " +
			"ranks, for an all-gather of the parameters every step (overlapped with the next forward as far as it can " +
			"be: zero.overlap_gather). It pays " +
			"where DDP runs out of memory or near it, or where the memory it frees buys a larger micro-batch; " +
			"where DDP fits with room, it is communication for nothing. Each ZeRO trial is judged against its " +
			"twin with zero.stage 0 (every other knob equal).",
		Needs: []string{"knob zero.stage", "mem_peak_bytes", "GPU memory", "oom outcomes"},
		Thresholds: []Threshold{
			{Name: "near_limit", Default: 0.80, Unit: "fraction", Doc: "the DDP twin's peak memory share of the GPU that counts as near the limit"},
			{Name: "min_loss", Default: 0.03, Unit: "fraction", Doc: "slowdown against the DDP twin that counts"},
		},
		check: checkZeroMemory,
	},
	{
		ID: "zero-gather-overlap-off", Title: "ZeRO's parameter all-gather not overlapped", Chapter: 22, Severity: Warning,
		Rationale: "With zero.overlap_gather (the default) each bucket's all-gather of the updated parameters runs " +
			"while the next forward computes the layers before the first that reads it; false waits for every " +
			"bucket in the step, so all of it is exposed (the records' gather_wait_ms). Turn it off only when measured faster.",
		Needs: []string{"knob zero.overlap_gather", "knob zero.stage", "samples_per_s", "gather_wait_ms"},
		check: checkZeroGatherOverlap,
	},
}

func checkZeroGatherOverlap(c *evalContext) verdict {
	var zs []*trial
	for _, t := range c.run.ok {
		if z := t.knob("zero.stage"); z != "" && z != "0" {
			zs = append(zs, t)
		}
	}
	if len(zs) == 0 {
		return na("no completed ZeRO trial (zero.stage 1 or 2)")
	}
	return checkOverlapOff(c, zs, overlapOff{
		knob:   "zero.overlap_gather",
		passOn: "zero.overlap_gather is on in the baseline and the best ZeRO trial",
		off:    "zero.overlap_gather is false (baseline %q, best ZeRO trial %s): every step waits for the parameters' all-gather, exposing %s of a %s step",
		// The all-gather's own wait, not the step's other exposed
		// communication (ZeRO-2's reduce-scatters, tensor collectives).
		exposed: func(t *trial) string {
			if t.GatherWaitMS > 0 {
				return ms(t.GatherWaitMS) + " (gather_wait_ms)"
			}
			return "an unrecorded wait (no gather_wait_ms in its records; " + ms(t.ExposedMS) + " of communication exposed in all)"
		},
		better:   "the overlapped all-gather was %s faster (trials %s, %s), yet the baseline or best ZeRO trial runs with zero.overlap_gather: false",
		worse:    "the exposed all-gather was measured faster (%s, trials %s, %s): keeping zero.overlap_gather off is justified",
		judged:   "overlapped against exposed all-gather: %s",
		evidence: func(b comparison) []string { return []string{verdictNote(b)} },
	})
}

func checkZeroMemory(c *evalContext) verdict {
	return checkShardingMemory(c, sharding{knob: "zero.stage", off: "0", name: "ZeRO", twin: "DDP twin",
		none: "no completed ZeRO trial (zero.stage 1 or 2)",
		recommendation: "keep zero.stage: 0 for this model on this machine, or spend the memory ZeRO frees: sweep a larger " +
			"micro_batch with zero.stage 1/2 against DDP's largest that fits"})
}

// sharding is a knob that divides model states across ranks for
// communication (zero.stage, tp.degree) as checkShardingMemory judges it.
type sharding struct {
	knob, off      string // the knob and its value that shards nothing
	name, twin     string // "ZeRO", "DDP twin": the words of the messages
	none           string // the message without such a trial
	recommendation string
	// free: knobs that may differ from the twin's at the same global batch
	// (tp: micro_batch, and sequence parallelism, which tp.degree 1 lacks).
	free []string
}

// checkShardingMemory judges each trial that shards (knob != off) against its
// twin that does not (every other knob equal): justified where the twin ran
// out of memory or peaked near the GPU's capacity, a finding where it is
// slower by min_loss or more while the twin had room.
func checkShardingMemory(c *evalContext, sh sharding) verdict {
	var zs []*trial
	for _, t := range c.run.ok {
		if z := t.knob(sh.knob); z != "" && z != sh.off {
			zs = append(zs, t)
		}
	}
	if len(zs) == 0 {
		return na("%s", sh.none)
	}
	capacity := float64(c.run.gpuMemBytes())
	if capacity == 0 {
		return na("no GPU memory capacity in the manifest (CPU run): nothing to be near")
	}
	var evidence, trials, justified []string
	judged := 0
	for _, t := range zs {
		tw := c.run.twin(t, sh.knob, sh.off)
		if tw == nil && len(sh.free) > 0 {
			tw = c.run.twinAtBatch(t, sh.knob, sh.off, sh.free)
		}
		if tw == nil {
			continue
		}
		judged++
		if tw.rec.Outcome == store.OOM {
			justified = append(justified, fmt.Sprintf("%s runs where its %s %s ran out of memory", t.ID, sh.twin, tw.ID))
			continue
		}
		if tw.rec.Outcome != store.OK || tw.MemPeak == 0 {
			continue
		}
		frac := float64(tw.MemPeak) / capacity
		if frac >= c.t("near_limit") {
			justified = append(justified, fmt.Sprintf("%s's %s %s peaked at %s of the GPU", t.ID, sh.twin, tw.ID, pct(frac)))
			continue
		}
		if sp := speedup(t, tw); sp < 1-c.t("min_loss") {
			evidence = append(evidence, fmt.Sprintf("%s is %s slower than its %s %s, which peaked at %s, %s of %s (%s: %s)",
				t.label(), pct(1-sp), sh.twin, tw.ID, gib(float64(tw.MemPeak)), pct(frac), gib(capacity), sh.name, gib(float64(t.MemPeak))))
			trials = append(trials, t.ID, tw.ID)
		}
	}
	if judged == 0 {
		return na("no %s trial has a twin with %s %s and every other knob equal", sh.name, sh.knob, sh.off)
	}
	if len(evidence) == 0 {
		msg := fmt.Sprintf("%d %s trial(s) judged against their %ss: none is slower by %s where the twin had room", judged, sh.name, sh.twin, pct(c.t("min_loss")))
		if len(justified) > 0 {
			msg += "; " + justified[0]
		}
		return pass("%s", msg)
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("%d %s trial(s) cost time where their %s fits with room: %s", len(evidence), sh.name, sh.twin, evidence[0]),
		Evidence:       limit(evidence, 8),
		Trials:         trials,
		Recommendation: sh.recommendation,
	}
}
