package checklist

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/stats"
)

// Compute-side rules: precision, fp16 overflow, CUDA Graphs.

var computeRules = []*Rule{
	{
		ID: "precision", Title: "Reduced precision is faster with matching loss", Chapter: 23, Severity: Warning,
		Rationale: "bf16/fp16 autocast (and TF32 matmuls) run on tensor cores at several times fp32's rate and halve " +
			"activation and gradient traffic. When a trial that differs from the baseline only in precision is " +
			"faster and ends at the same loss, the baseline leaves speed unused.",
		Needs: []string{"knob precision", "samples_per_s", "final_loss", "a pair of trials differing only in precision"},
		Thresholds: []Threshold{
			{Name: "min_speedup", Default: 1.10, Unit: "x", Doc: "speed-up over the baseline's precision that makes a recommendation (the pair must also be decided faster over launches)"},
			{Name: "loss_tolerance", Default: 0.02, Unit: "fraction", Doc: "largest relative difference of final loss that still counts as matching"},
		},
		check: checkPrecision,
	},
	{
		ID: "fp16-overflow", Title: "fp16 steps skipped for overflow", Chapter: 23, Severity: Warning,
		Rationale: "fp16's narrow range needs dynamic loss scaling; a step whose gradients overflow is skipped. " +
			"Many skipped steps mean wasted work, fewer real updates, and an inflated throughput (skipped steps " +
			"do no optimizer step); a collapsing loss scale means the gradients keep overflowing.",
		Needs: []string{"knob precision", "steps[].skipped", "steps[].loss_scale"},
		Thresholds: []Threshold{
			{Name: "max_skipped_frac", Default: 0.02, Unit: "fraction", Doc: "largest share of measured steps that may be skipped"},
			{Name: "min_loss_scale", Default: 1, Unit: "scale", Doc: "a loss scale below this means persistent overflow"},
		},
		check: checkFP16Overflow,
	},
	{
		ID: "cuda-graphs", Title: "CUDA Graphs for launch-bound steps", Chapter: 27, Severity: Warning,
		Rationale: "Short steps made of many small kernels are bound by CPU launch overhead; capturing the step in " +
			"a CUDA Graph replays it with one launch. Judged from a graphs on/off pair when the study swept it, " +
			"else from the best trial's kernel profile when it has one (its GPU idle share against " +
			"profile-launch-bound's max_idle_share, so the two rules agree), else from short steps at low MFU " +
			"(a hint, reported as info).",
		Needs: []string{"knob graphs", "samples_per_s", "step_ms", "mfu", "profile.idle_share (when profiled)"},
		Thresholds: []Threshold{
			{Name: "min_speedup", Default: 1.05, Unit: "x", Doc: "speed-up of graphs: true that makes a recommendation (decided faster too)"},
			{Name: "small_step_ms", Default: 50, Unit: "ms", Doc: "steps shorter than this may be launch-bound"},
			{Name: "low_mfu", Default: 0.30, Unit: "fraction", Doc: "MFU below this, with short steps, suggests launch overhead"},
		},
		check: checkGraphs,
	},
}

// comparison is one pair oriented from the baseline side to the alternative.
type comparison struct {
	Base, Alt *trial
	Speedup   float64          // Alt over Base
	Cmp       stats.Comparison // Alt against Base over launches, Holm-corrected
	Holm      bool             // its test survives Holm's correction over the run's pairs
}

// measured is the direction the pair's interval shows (stats.Direction),
// kept only when its test survives Holm's correction: the rules weigh the
// size against their own min_speedup, not the study's δ.
func measured(cmp comparison) stats.Verdict {
	if !cmp.Holm {
		return stats.Undecided
	}
	return cmp.Cmp.Direction()
}

// against orients every pair of knob so that Base holds baseVal; pairs where
// neither side holds it are left out.
func (v *runView) against(knob, baseVal string) []comparison {
	var out []comparison
	for _, p := range v.pairs(knob) {
		switch {
		case p.A.knob(knob) == baseVal:
			out = append(out, comparison{Base: p.A, Alt: p.B, Speedup: speedup(p.B, p.A), Cmp: v.compare(p.B, p.A), Holm: v.holm[pairKey(p.A, p.B)]})
		case p.B.knob(knob) == baseVal:
			out = append(out, comparison{Base: p.B, Alt: p.A, Speedup: speedup(p.A, p.B), Cmp: v.compare(p.A, p.B), Holm: v.holm[pairKey(p.A, p.B)]})
		}
	}
	return out
}

// fastest returns the comparison with the largest speed-up (nil for none).
func fastest(cs []comparison) *comparison {
	var best *comparison
	for i := range cs {
		if math.IsNaN(cs[i].Speedup) {
			continue
		}
		if best == nil || cs[i].Speedup > best.Speedup {
			best = &cs[i]
		}
	}
	return best
}

// clearlyFaster reports whether the alternative beat the baseline side by at
// least minSpeedup and is decided faster over launches (Welch, corrected for
// the number of comparisons).
func clearlyFaster(cmp comparison, minSpeedup float64) bool {
	return !math.IsNaN(cmp.Speedup) && cmp.Speedup >= minSpeedup && measured(cmp) == stats.Better
}

// verdictNote is the comparison's ratio, interval and verdict in the report's
// words, for evidence lines.
func verdictNote(cmp comparison) string {
	return fmt.Sprintf("%s vs %s: %s (%s, %d vs %d launches)", cmp.Alt.ID, cmp.Base.ID, cmp.Cmp.Text(), cmp.Cmp.PText(),
		cmp.Cmp.NTrial, cmp.Cmp.NBase)
}

// winner returns the fastest comparison that is clearly faster (nil for
// none) and the fastest overall (nil when no pair has a speed).
func winner(cs []comparison, minSpeedup float64) (win, top *comparison) {
	var clear []comparison
	for _, c := range cs {
		if clearlyFaster(c, minSpeedup) {
			clear = append(clear, c)
		}
	}
	return fastest(clear), fastest(cs)
}

// precisionRank orders precisions from full to reduced.
func precisionRank(p string) int {
	return map[string]int{"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 2, "fp8": 3}[p]
}

func precisionName(p string) string {
	switch p {
	case "bf16", "fp16":
		return p + " autocast"
	case "tf32":
		return "TF32 matmuls"
	case "fp8":
		return "fp8 (FP8 linear layers)"
	}
	return p
}

func relDiff(a, b float64) float64 {
	if b == 0 {
		return math.Abs(a - b)
	}
	return math.Abs(a-b) / math.Abs(b)
}

func checkPrecision(c *evalContext) verdict {
	base := c.run.baseline("precision")
	if base == "" {
		base = "fp32"
	}
	if len(c.run.pairs("precision")) == 0 {
		return na("no two completed trials differ only in precision (sweep precision: [%s, bf16] to measure it)", base)
	}
	var comps []comparison
	for _, cmp := range c.run.against("precision", base) {
		if precisionRank(cmp.Alt.knob("precision")) > precisionRank(base) {
			comps = append(comps, cmp)
		}
	}
	if len(comps) == 0 {
		return na("no completed trial with a lower precision than the baseline's %s differs from it only in precision", base)
	}
	var good, fastButOff, unknownLoss []comparison
	for _, cmp := range comps {
		if !clearlyFaster(cmp, c.t("min_speedup")) {
			continue
		}
		switch {
		case math.IsNaN(cmp.Alt.Loss) || math.IsNaN(cmp.Base.Loss):
			unknownLoss = append(unknownLoss, cmp)
		case relDiff(cmp.Alt.Loss, cmp.Base.Loss) <= c.t("loss_tolerance"):
			good = append(good, cmp)
		default:
			fastButOff = append(fastButOff, cmp)
		}
	}
	if b := fastest(good); b != nil {
		alt := b.Alt.knob("precision")
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("%s was %s faster than %s (trials %s, %s) with loss within %s",
				precisionName(alt), x(b.Speedup), base, b.Alt.ID, b.Base.ID, pct(relDiff(b.Alt.Loss, b.Base.Loss))),
			Evidence: []string{
				fmt.Sprintf("%s: %.4g samples/s, final loss %.4g", b.Alt.label(), b.Alt.Throughput, b.Alt.Loss),
				fmt.Sprintf("%s: %.4g samples/s, final loss %.4g", b.Base.label(), b.Base.Throughput, b.Base.Loss),
			},
			Trials:         ids(b.Alt, b.Base),
			Recommendation: "use precision: " + alt,
		}
	}
	if b := fastest(fastButOff); b != nil {
		return pass("%s was %s faster than %s (trials %s, %s) but its final loss differs by %s (tolerance %s): not recommended without checking convergence",
			b.Alt.knob("precision"), x(b.Speedup), base, b.Alt.ID, b.Base.ID,
			pct(relDiff(b.Alt.Loss, b.Base.Loss)), pct(c.t("loss_tolerance")))
	}
	if b := fastest(unknownLoss); b != nil {
		return na("%s was %s faster than %s (trials %s, %s) but the final loss was not recorded, so matching loss cannot be checked",
			b.Alt.knob("precision"), x(b.Speedup), base, b.Alt.ID, b.Base.ID)
	}
	b := fastest(comps)
	if b == nil {
		return na("the precision pairs have no throughput or step time")
	}
	return pass("reduced precision gained at most %s over %s (trials %s, %s), below %s or not decided faster (%s): keeping %s is fine",
		x(b.Speedup), base, b.Alt.ID, b.Base.ID, x(c.t("min_speedup")), b.Cmp.Text(), base)
}

func checkFP16Overflow(c *evalContext) verdict {
	var fp16 []*trial
	for _, t := range c.run.ok {
		if t.knob("precision") == "fp16" {
			fp16 = append(fp16, t)
		}
	}
	if len(fp16) == 0 {
		return na("no completed fp16 trial")
	}
	var bad []string
	var badTrials []string
	measured := false
	worst := 0.0
	for _, t := range fp16 {
		if t.Measured == 0 {
			continue
		}
		measured = true
		frac := float64(t.Skipped) / float64(t.Measured)
		worst = math.Max(worst, frac)
		minScale := math.Inf(1)
		t.steps(func(_ int, s stepMetrics) {
			if s.LossScale > 0 {
				minScale = math.Min(minScale, s.LossScale)
			}
		})
		var why []string
		if frac > c.t("max_skipped_frac") {
			why = append(why, fmt.Sprintf("skipped %d of %d measured steps (%s)", t.Skipped, t.Measured, pct(frac)))
		}
		if !math.IsInf(minScale, 1) && minScale < c.t("min_loss_scale") {
			why = append(why, fmt.Sprintf("loss scale fell to %g", minScale))
		}
		if len(why) > 0 {
			bad = append(bad, t.label()+": "+strings.Join(why, ", "))
			badTrials = append(badTrials, t.ID)
		}
	}
	if !measured {
		return na("the fp16 trials recorded no measured steps")
	}
	if len(bad) == 0 {
		return pass("%d fp16 trial(s) skipped at most %s of their measured steps", len(fp16), pct(worst))
	}
	return verdict{
		Status:   Finding,
		Message:  fmt.Sprintf("%d fp16 trial(s) overflowed: %s", len(bad), bad[0]),
		Evidence: limit(bad, 8),
		Trials:   badTrials,
		Recommendation: "use precision: bf16 (fp32's exponent range, no loss scaling needed); if fp16 must stay, " +
			"lower the initial loss scale and check for inf/NaN sources; throughput of skipped steps is inflated " +
			"(no optimizer step)",
	}
}

func checkGraphs(c *evalContext) verdict {
	base := c.run.baseline("graphs")
	if len(c.run.pairs("graphs")) > 0 {
		comps := c.run.against("graphs", "false")
		win, b := winner(comps, c.t("min_speedup"))
		if b == nil {
			return na("the graphs pairs have no throughput or step time")
		}
		if win != nil && base != "true" {
			b = win
			return verdict{
				Status: Finding,
				Message: fmt.Sprintf("CUDA Graphs made the step %s faster (%s → %s, trials %s, %s)",
					x(b.Speedup), ms(b.Base.StepMS), ms(b.Alt.StepMS), b.Alt.ID, b.Base.ID),
				Evidence: []string{
					fmt.Sprintf("%s: step %s, %.4g samples/s", b.Alt.label(), ms(b.Alt.StepMS), b.Alt.Throughput),
					fmt.Sprintf("%s: step %s, %.4g samples/s", b.Base.label(), ms(b.Base.StepMS), b.Base.Throughput),
				},
				Trials:         ids(b.Alt, b.Base),
				Recommendation: "use graphs: true",
			}
		}
		if base == "true" && b.Speedup < 1/c.t("min_speedup") && measured(*b) == stats.Worse {
			return verdict{
				Status:         Finding,
				Message:        fmt.Sprintf("the baseline captures CUDA Graphs, but replay was at best %s the speed of eager (trials %s, %s)", x(b.Speedup), b.Alt.ID, b.Base.ID),
				Trials:         ids(b.Alt, b.Base),
				Recommendation: "use graphs: false (the steps are not launch-bound)",
			}
		}
		if win != nil { // base == "true": the study already does what the rule would recommend
			return pass("the baseline already uses CUDA Graphs, %s faster than eager (trials %s, %s: %s)",
				x(win.Speedup), win.Alt.ID, win.Base.ID, win.Cmp.Text())
		}
		return pass("CUDA Graphs changed speed by at most %s (trials %s, %s: %s); a recommendation needs %s and a faster verdict",
			x(b.Speedup), b.Alt.ID, b.Base.ID, b.Cmp.Text(), x(c.t("min_speedup")))
	}
	t := c.run.best
	if t == nil {
		return na("no completed trial")
	}
	if t.knob("graphs") == "true" {
		return pass("the best trial %s already captures CUDA Graphs", t.ID)
	}
	// A kernel profile measures what the step length and MFU only hint at:
	// how long the GPU waited for the host. Judged as profile-launch-bound
	// judges it (its max_idle_share), so the two rules agree.
	if p := profile.Mean(t.rec.Profiles(0)); p != nil && p.Device == "cuda" {
		limitShare := c.of("profile-launch-bound", "max_idle_share")
		if p.IdleShare > limitShare {
			return verdict{
				Status:   Finding,
				Severity: Info,
				Message: fmt.Sprintf("the best trial %s runs eager and its profile shows the GPU idle %s of its %s step (above %s): launch-bound",
					t.ID, pct(p.IdleShare), ms(profileStep(p)), pct(limitShare)),
				Trials:         ids(t),
				Recommendation: "sweep graphs: [false, true] to measure CUDA Graphs on this workload",
			}
		}
		return pass("the best trial %s steps in %s at %s MFU, but its profile shows the GPU idle only %s of the step (at most %s): not launch-bound",
			t.ID, ms(t.StepMS), pct(t.MFU), pct(p.IdleShare), pct(limitShare))
	}
	if !c.run.onGPU() || t.MFU <= 0 {
		return na("no graphs on/off pair, and no MFU to judge launch overhead (CPU run or unknown peak)")
	}
	if t.StepMS < c.t("small_step_ms") && t.MFU < c.t("low_mfu") {
		return verdict{
			Status:   Finding,
			Severity: Info,
			Message: fmt.Sprintf("the best trial %s steps in %s at %s MFU: short steps at low MFU are often launch-bound",
				t.ID, ms(t.StepMS), pct(t.MFU)),
			Trials:         ids(t),
			Recommendation: "sweep graphs: [false, true] to measure CUDA Graphs on this workload",
		}
	}
	return pass("the best trial %s steps in %s at %s MFU: not launch-bound by these thresholds", t.ID, ms(t.StepMS), pct(t.MFU))
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
