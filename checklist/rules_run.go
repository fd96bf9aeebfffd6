package checklist

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/provenance"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Rules about the run itself: measurement hygiene, knobs without effect,
// failures that may hide the best configuration.

var runRules = []*Rule{
	{
		ID: "measurement-hygiene", Title: "Measurement hygiene", Chapter: 17, Severity: Warning,
		Rationale: "Numbers are only as good as the measurement: too few warm-up steps keep allocator growth and " +
			"autotuning in the timings, too few steps or repeats hide the variance, and noisy or throttled trials " +
			"make differences between trials unreliable.",
		Needs: []string{"workload warmup_steps, steps, repeats", "step_cv / repeat_cv, noisy", "throttled, gpu_samples"},
		Thresholds: []Threshold{
			{Name: "min_warmup_steps", Default: 3, Unit: "steps", Doc: "fewest warm-up steps"},
			{Name: "min_steps", Default: 20, Unit: "steps", Doc: "fewest measured steps per repeat"},
			{Name: "min_repeats", Default: 3, Unit: "launches", Doc: "fewest repeats (separate launches) per trial"},
			{Name: "max_cv", Default: 0.05, Unit: "fraction", Doc: "run-to-run noise above this makes a trial noisy"},
		},
		check: checkHygiene,
	},
	{
		ID: "no-effect-knob", Title: "Knobs that had no measurable effect", Chapter: 17, Severity: Info,
		Rationale: "A knob whose every clean pair (trials differing only in it) is decided \"within ±δ\" " +
			"(the study's compare.threshold; Welch interval over launches inside [1/(1+δ), 1+δ], even when it " +
			"excludes 1) had no effect larger than δ, and should not be credited for a speed-up. A pair that is still undecided does " +
			"not count as no effect. For nccl.algo/nccl.proto, NCCL's own tuning log shows when auto already " +
			"chose the forced value. Which value to keep follows the measurement, not the knob's default: the value " +
			"measurably faster (its interval excludes 1, if by less than δ) in some pair and slower in none, else " +
			"either, as both are within ±δ.",
		Needs: []string{"pairs of trials differing in one knob", "samples_per_s of each launch", "NCCL tuning log lines (optional)"},
		check: checkNoEffect,
	},
	{
		ID: "failed-trials", Title: "Failed trials that may hide the best configuration", Chapter: 19, Severity: Warning,
		Rationale: "A trial that failed, ran out of memory or timed out is missing from the comparison. When it " +
			"differs from the best trial in a direction that usually helps (reduced precision, CUDA Graphs, a larger " +
			"micro-batch, overlap, more micro-batches ...), the real best configuration may be the one that failed. " +
			"A planned trial without a record never ran (the run stopped before it; the report lists it not_run): the " +
			"run did not measure its plan, which is a finding of severity error whatever its knobs, as is a run " +
			"without a single trial.",
		Needs: []string{"trial outcomes and errors", "knobs", "manifest plan (planned trials without a record)"},
		check: checkFailedTrials,
	},
}

// workloadInt reads an integer of the manifest's workload map.
func (v *runView) workloadInt(key string) (int, bool) {
	switch n := v.run.Manifest.Workload[key].(type) {
	case float64:
		return int(n), true
	case int:
		return n, true
	case int64:
		return int(n), true
	case json.Number:
		i, err := n.Int64()
		return int(i), err == nil
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil
	}
	return 0, false
}

func checkHygiene(c *evalContext) verdict {
	if len(c.run.all) == 0 {
		return na("the run has no trial records")
	}
	warmup, okW := c.run.workloadInt("warmup_steps")
	steps, okS := c.run.workloadInt("steps")
	repeats, okR := c.run.workloadInt("repeats")
	for _, t := range c.run.ok { // fall back on what the records show
		rps := t.okRepeats()
		if !okR {
			repeats, okR = len(t.rec.Repeats), true
		}
		if len(rps) > 0 && len(rps[0].Ranks) > 0 {
			if !okW {
				warmup, okW = rps[0].Ranks[0].WarmupSteps, true
			}
			if !okS {
				steps, okS = len(rank0(rps[0])), true
			}
		}
	}
	var problems, kinds, recs, trials []string
	if okW && float64(warmup) < c.t("min_warmup_steps") {
		problems = append(problems, fmt.Sprintf("%d warm-up step(s) (< %s): the first steps include allocator growth, autotuning and graph capture", warmup, num(c.t("min_warmup_steps"))))
		kinds = append(kinds, "too few warm-up steps")
		recs = append(recs, fmt.Sprintf("workload.warmup_steps: %s", num(c.t("min_warmup_steps"))))
	}
	if okS && float64(steps) < c.t("min_steps") {
		problems = append(problems, fmt.Sprintf("%d measured step(s) per repeat (< %s)", steps, num(c.t("min_steps"))))
		kinds = append(kinds, "too few measured steps")
		recs = append(recs, fmt.Sprintf("workload.steps: %s", num(c.t("min_steps"))))
	}
	if okR && float64(repeats) < c.t("min_repeats") {
		problems = append(problems, fmt.Sprintf("%d repeat(s) per trial (< %s): run-to-run variance is not measured", repeats, num(c.t("min_repeats"))))
		kinds = append(kinds, "too few repeats")
		recs = append(recs, fmt.Sprintf("workload.repeats: %s", num(c.t("min_repeats"))))
	}
	var noisy, throttled []string
	for _, t := range c.run.ok {
		if why := noisyWhy(t, c.t("max_cv")); why != "" {
			noisy = append(noisy, fmt.Sprintf("%s (%s)", t.ID, why))
			trials = append(trials, t.ID)
		}
		if t.rec.Throttled || throttledSamples(t.rec) {
			throttled = append(throttled, t.ID)
			trials = append(trials, t.ID)
		}
	}
	if len(noisy) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d completed trial(s) are noisy: %s", len(noisy), len(c.run.ok), strings.Join(limit(noisy, 6), ", ")))
		kinds = append(kinds, "noisy trials")
		rec := "re-run noisy trials on an idle machine, with more steps or repeats"
		if on, _ := c.run.run.Manifest.Workload["interleave"].(bool); on {
			rec += "; interleave is on already: open the noisy trials' launches in the report (Every launch, step by step) " +
				"to tell host jitter (single slow steps) from power capping (a falling SM clock)"
		} else {
			rec += " (workload.interleave: true spreads drift over trials)"
		}
		recs = append(recs, rec)
	}
	if len(throttled) > 0 {
		problems = append(problems, fmt.Sprintf("%d trial(s) ran while a GPU was thermally or power throttled: %s", len(throttled), strings.Join(limit(throttled, 6), ", ")))
		kinds = append(kinds, "throttled GPUs")
		recs = append(recs, "check cooling and power limits (nvidia-smi -q -d PERFORMANCE) and re-run the throttled trials")
	}
	if len(problems) == 0 {
		return pass("%d warm-up, %d measured steps, %d repeats; no noisy or throttled trial", warmup, steps, repeats)
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("%d measurement problem(s): %s", len(problems), strings.Join(kinds, ", ")),
		Evidence:       problems,
		Trials:         trials,
		Recommendation: strings.Join(recs, "; "),
	}
}

// noisyWhy says why a trial is noisy ("" when it is not): step-time CV or
// throughput CV across repeats above maxCV (the runner's own "noisy" test, with
// the study's threshold).
func noisyWhy(t *trial, maxCV float64) string {
	stepCV, repeatCV := 0.0, t.Noise
	if s := t.rec.Summary; s != nil {
		stepCV, repeatCV = s.StepCV, s.RepeatCV
	}
	var why []string
	if stepCV > maxCV {
		why = append(why, "step CV "+pct(stepCV))
	}
	if repeatCV > maxCV {
		why = append(why, "repeat CV "+pct(repeatCV))
	}
	return strings.Join(why, ", ")
}

// NVML clock-event reasons that mean the GPU slowed down: HW slowdown,
// SW thermal, HW thermal, HW power brake (not the power cap).
const throttleMask = provenance.TaintMask

func throttledSamples(rec *store.TrialRecord) bool {
	for _, rp := range rec.Repeats {
		if rp.Throttle != nil { // measured over the measured window (counters or samples)
			if provenance.Tainted(rp.Throttle) != "" {
				return true
			}
			continue
		}
		for _, s := range rp.GPUSamples { // records from before: any sample of the launch
			if s.Throttles&throttleMask != 0 {
				return true
			}
		}
	}
	return false
}

func checkNoEffect(c *evalContext) verdict {
	var knobs []string
	for _, k := range c.run.varied() {
		if !strings.HasPrefix(k, "fault.") {
			knobs = append(knobs, k)
		}
	}
	if len(knobs) == 0 {
		return na("no two completed trials differ in exactly one knob")
	}
	var lines, trials, names, advice []string
	for _, k := range knobs {
		ps := c.run.pairs(k)
		var widest stats.Comparison
		var wa, wb *trial
		var cmps []pairCmp
		same := true
		for _, p := range ps {
			cmp := c.run.compare(p.A, p.B)
			if cmp.Verdict != stats.NoDifference {
				same = false // an effect, or not decided: no claim of "no effect"
				break
			}
			cmps = append(cmps, pairCmp{p.A, p.B, cmp})
			if wa == nil || math.Abs(math.Log(cmp.Ratio)) > math.Abs(math.Log(widest.Ratio)) {
				widest, wa, wb = cmp, p.A, p.B
			}
		}
		if !same || wa == nil {
			continue
		}
		line := fmt.Sprintf("%s: %s vs %s: %s (%s, %d vs %d launches; trials %s, %s; %d pair(s))",
			k, wa.knob(k), wb.knob(k), widest.Text(), widest.PText(), widest.NTrial, widest.NBase, wa.ID, wb.ID, len(ps))
		line += c.run.ncclSameChoice(k, ps)
		lines = append(lines, line)
		names = append(names, k)
		trials = append(trials, wa.ID, wb.ID)
		advice = append(advice, keepAdvice(k, cmps, c.run.level.Threshold))
	}
	if len(lines) == 0 {
		return pass("no swept knob (%s) was decided \"within ±%s\" (no effect larger than %s) in every clean pair", strings.Join(knobs, ", "),
			stats.PercentText(c.run.level.Threshold), stats.PercentText(c.run.level.Threshold))
	}
	sort.Strings(names)
	band := stats.PercentText(c.run.level.Threshold)
	return verdict{
		Status: Finding,
		Message: fmt.Sprintf("%d knob(s) had no effect larger than %s: %s", len(names),
			band, strings.Join(names, ", ")),
		Evidence: lines,
		Trials:   trials,
		Recommendation: fmt.Sprintf("do not credit these knobs for a speed-up larger than %s; %s; measure again with more repeats if a larger effect is expected",
			band, strings.Join(advice, "; ")),
	}
}

// pairCmp is a pair of trials with its comparison (A against B).
type pairCmp struct {
	A, B *trial
	Cmp  stats.Comparison
}

// keepAdvice says, for a knob whose every pair lies within ±δ, which value to
// keep by the measurement: the value that was measurably faster (its
// interval excludes 1) in some pair and slower in none, or, when no pair
// tells the values apart, that either is within ±δ. The knob registry's
// default plays no part: a baseline away from it may be the faster side.
func keepAdvice(knob string, cs []pairCmp, threshold float64) string {
	band := stats.PercentText(threshold)
	beats := map[string][]string{} // a value -> the values it was measurably faster than
	losses := map[string]bool{}
	var order []string
	lo, hi := math.Inf(1), 0.0 // the measurable gains, as fractions of the slower side's speed
	for _, pc := range cs {
		var fast, slow string
		var gainLo, gainHi float64
		switch pc.Cmp.Direction() {
		case stats.Better:
			fast, slow = pc.A.knob(knob), pc.B.knob(knob)
			gainLo, gainHi = pc.Cmp.Lo-1, pc.Cmp.Hi-1
		case stats.Worse:
			fast, slow = pc.B.knob(knob), pc.A.knob(knob)
			gainLo, gainHi = 1/pc.Cmp.Hi-1, 1/pc.Cmp.Lo-1
		default:
			continue
		}
		if _, seen := beats[fast]; !seen {
			order = append(order, fast)
		}
		if !slices.Contains(beats[fast], slow) {
			beats[fast] = append(beats[fast], slow)
		}
		losses[slow] = true
		lo, hi = min(lo, gainLo), max(hi, gainHi)
	}
	var keep []string
	for _, v := range order {
		if !losses[v] {
			keep = append(keep, v)
		}
	}
	switch {
	case len(beats) == 0:
		return fmt.Sprintf("%s: no value was measurably faster, every pair is within ±%s: choose by memory or simplicity", knob, band)
	case len(keep) == 1:
		return fmt.Sprintf("%s: keep %s, measurably faster (+%.1f to +%.1f%%, less than %s) than %s", knob, keep[0],
			100*lo, 100*hi, band, strings.Join(beats[keep[0]], ", "))
	}
	return fmt.Sprintf("%s: no single value was measurably fastest in every pair (all within ±%s): choose by memory or simplicity", knob, band)
}

// ncclSameChoice notes, for a forced NCCL knob, when NCCL's log shows that auto
// chose the same algorithm or protocol ("" when unknown or different).
func (v *runView) ncclSameChoice(knob string, ps []pair) string {
	if knob != "nccl.algo" && knob != "nccl.proto" {
		return ""
	}
	for _, p := range ps {
		auto, forced := p.A, p.B
		if forced.knob(knob) == "auto" {
			auto, forced = forced, auto
		}
		if auto.knob(knob) != "auto" {
			continue
		}
		ch := v.ncclChoices(auto)
		if ch == nil {
			continue
		}
		chosen := only(ch.Algo)
		if knob == "nccl.proto" {
			chosen = only(ch.Proto)
		}
		if chosen != "" && strings.EqualFold(chosen, forced.knob(knob)) {
			return fmt.Sprintf("; NCCL's log shows auto already chose %s for all %d all-reduces of %s", chosen, ch.N, auto.ID)
		}
	}
	return ""
}

// helps reports whether moving a knob from the best trial's value to v usually
// makes training faster (or lets a larger configuration fit).
func helps(knob, best, v string) bool {
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	switch knob {
	case "precision":
		return precisionRank(v) > precisionRank(best)
	case "graphs", "ddp.overlap", "mps", "channels_last":
		return v == "true" && best != "true"
	case "activation_checkpointing":
		return v == "false" && best == "true"
	case "micro_batch", "pipeline.microbatches", "grad_accum":
		return atoi(v) > atoi(best)
	case "pipeline.schedule":
		return v == "1f1b" && best == "gpipe"
	}
	return false
}

var failedOutcomes = map[store.Outcome]string{
	store.Failed:      "see the error and logs/<trial>/rank<k>.r<rep>.log, fix it and re-run the trial (its record's command re-runs it alone)",
	store.Crashed:     "see the failing rank's log (logs/<trial>/), fix it and re-run the trial",
	store.OOM:         "it ran out of memory: try activation_checkpointing: true or a smaller micro_batch with grad_accum, then re-run",
	store.Timeout:     "it passed its deadline: raise workload.timeout if it was slow, or read the ranks' last steps and logs for a hang",
	store.Interrupted: "the run was stopped: finish it with casestudy run --resume",
}

func checkFailedTrials(c *evalContext) verdict {
	if len(c.run.trials()) == 0 && len(c.run.notRun) == 0 {
		return nothingMeasured()
	}
	var failed []*trial
	for _, t := range c.run.all {
		if _, ok := failedOutcomes[t.rec.Outcome]; ok {
			failed = append(failed, t)
		}
	}
	// Planned trials without a record never ran: the run did not measure its
	// plan, and its best trial is the best of what it measured (an error,
	// whatever the missing trials' knobs).
	var notRun, notRunIDs []string
	for _, p := range c.run.notRun {
		notRun, notRunIDs = append(notRun, notRunLine(p)), append(notRunIDs, p.ID)
	}
	if len(failed) == 0 && len(notRun) == 0 {
		return pass("no trial failed, ran out of memory, timed out or was interrupted (%s)", c.run.measuredOf())
	}
	best := c.run.best
	var lines, trials []string
	var recs []string
	seenRec := map[string]bool{}
	addRec := func(r string) {
		if !seenRec[r] {
			seenRec[r] = true
			recs = append(recs, r)
		}
	}
	if len(notRun) > 0 {
		addRec("not run: " + notRunAdvice)
	}
	for _, f := range failed {
		var dirs []string
		if best != nil {
			for _, k := range sortedKeys(f.Knobs) {
				if bv := best.knob(k); f.knob(k) != bv && helps(k, bv, f.knob(k)) {
					dirs = append(dirs, fmt.Sprintf("%s: %s→%s", k, bv, f.knob(k)))
				}
			}
			if len(dirs) == 0 {
				continue
			}
		}
		line := fmt.Sprintf("%s ended %s", f.ID, f.rec.Outcome)
		if e := firstLine(f.rec.Error); e != "" {
			line += " (" + e + ")"
		}
		if len(dirs) > 0 {
			line += "; differs from the best trial in " + strings.Join(dirs, ", ")
		}
		lines = append(lines, line)
		trials = append(trials, f.ID)
		addRec(string(f.rec.Outcome) + ": " + failedOutcomes[f.rec.Outcome])
	}
	switch {
	case len(notRun) > 0:
		msg := fmt.Sprintf("%d of %d planned trial(s) never ran (no record in trials.jsonl), e.g. %s", len(notRun), c.run.planned(), plannedLabel(c.run.notRun[0]))
		if best == nil {
			msg = "no trial completed; " + msg
		} else {
			msg += fmt.Sprintf("; the best trial %s is the best of the %d measured", best.ID, len(c.run.ok))
		}
		if len(failed) > 0 {
			msg += fmt.Sprintf("; %d more ended badly", len(failed))
		}
		return verdict{
			Status:         Finding,
			Severity:       Error,
			Message:        msg,
			Evidence:       limit(append(notRun, lines...), 10),
			Trials:         append(notRunIDs, trials...),
			Recommendation: strings.Join(recs, "; "),
		}
	case best == nil:
		f := failed[0]
		return verdict{
			Status:         Finding,
			Severity:       Error,
			Message:        fmt.Sprintf("no trial completed; %d ended badly, e.g. %s: %s %s", len(failed), f.label(), f.rec.Outcome, firstLine(f.rec.Error)),
			Evidence:       limit(lines, 10),
			Trials:         ids(failed...),
			Recommendation: strings.Join(recs, "; "),
		}
	case len(lines) == 0:
		return pass("%d trial(s) ended badly, none in a direction from the best trial %s that usually helps (%s)", len(failed), best.ID, c.run.measuredOf())
	}
	return verdict{
		Status:         Finding,
		Message:        fmt.Sprintf("%d failed trial(s) may hide a better configuration than the best trial %s: %s", len(lines), best.ID, lines[0]),
		Evidence:       limit(lines, 10),
		Trials:         append(trials, best.ID),
		Recommendation: strings.Join(recs, "; "),
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
