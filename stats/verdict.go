package stats

import (
	"fmt"
	"math"
	"strconv"
)

// Verdict is what a comparison says about the trial against its reference.
type Verdict string

// Verdicts. The words people read come from Comparison.VerdictText, the same
// in the report, the terminal, compare and the checklist.
const (
	Better       Verdict = "better"        // interval above 1: "faster" ("less memory")
	Worse        Verdict = "worse"         // interval below 1: "slower" ("more memory")
	NoDifference Verdict = "no_difference" // interval inside [1/(1+δ), 1+δ]
	Undecided    Verdict = "undecided"     // none of these yet (or one launch)
)

// Practical is where a comparison's interval lies against the band
// [L, U] = [1/(1+δ), 1+δ] (docs/reports.md, "Verdicts").
type Practical string

const (
	Within     Practical = "within"     // inside the band: no difference larger than δ
	Beyond     Practical = "beyond"     // wholly above U or below L: faster or slower by more than δ
	Unresolved Practical = "unresolved" // excludes 1 but holds a band edge
)

// Decided reports whether the interval is settled against the band (within
// or beyond): the only rows at which repeats: auto stops a trial.
func (p Practical) Decided() bool { return p == Within || p == Beyond }

func (p Practical) json() *string {
	if p == "" {
		return nil
	}
	s := string(p)
	return &s
}

// Winner reports whether the comparison names the trial better than its
// reference by more than δ: the only verdict a headline or a colour may call
// a win.
func (c Comparison) Winner() bool { return c.Verdict == Better && c.Practical == Beyond }

// Loser is the mirror of Winner: worse by more than δ.
func (c Comparison) Loser() bool { return c.Verdict == Worse && c.Practical == Beyond }

// Direction is the sign the interval shows, whatever δ: Better when it lies
// above 1, Worse below, else Undecided. Checklist rules with thresholds of
// their own (min_speedup) read it; the verdict words do not.
func (c Comparison) Direction() Verdict {
	switch {
	case !c.Bounded() || c.Verdict == Undecided:
		return Undecided
	case c.Lo > 1:
		return Better
	case c.Hi < 1:
		return Worse
	}
	return Undecided
}

// VerdictText is the verdict in words, equivalence first (δ = 5%):
//
//	within ±5%                                   (+ "(measurably faster, +2.0 to +3.0%)" when it excludes 1)
//	faster by more than 5%  /  slower by more than 5%
//	faster, by 2.0–8.0% (more than 5% not shown; needs ~3 more launches)
//	undecided (needs ~12 more launches)  /  undecided (one launch: estimate only)
//
// For memory, "less memory" and "more memory" replace faster and slower.
// Percentages are symmetric as the band is: "faster (slower) by p%" means
// the better side's rate is 1+p times the other's, so "slower by 5%" is a
// ratio of 1/1.05 (a 5% longer step, 4.8% less throughput), the band's lower
// edge, and "slower, by 4.0–6.2%" reads against "more than 5%" in one unit.
func (c Comparison) VerdictText() string {
	better, worse := "faster", "slower"
	if !c.Metric.Speed() {
		better, worse = "less memory", "more memory"
	}
	band := PercentText(c.Threshold)
	switch {
	case c.Verdict == NoDifference:
		t := "within ±" + band
		switch {
		case c.Bounded() && c.Lo > 1:
			t += fmt.Sprintf(" (measurably %s, +%s to +%s%%)", better, pct1(c.Lo-1), pct1(c.Hi-1))
		case c.Bounded() && c.Hi < 1:
			t += fmt.Sprintf(" (measurably %s, −%s to −%s%%)", worse, pct1(1/c.Hi-1), pct1(1/c.Lo-1))
		}
		return t
	case c.Verdict == Better && c.Practical == Beyond:
		return better + " by more than " + band
	case c.Verdict == Worse && c.Practical == Beyond:
		return worse + " by more than " + band
	case c.Verdict == Better:
		return fmt.Sprintf("%s, by %s–%s%% (more than %s not shown%s%s)", better, pct1(c.Lo-1), pct1(c.Hi-1), band, c.holm(), c.needs("; "))
	case c.Verdict == Worse:
		return fmt.Sprintf("%s, by %s–%s%% (more than %s not shown%s%s)", worse, pct1(1/c.Hi-1), pct1(1/c.Lo-1), band, c.holm(), c.needs("; "))
	}
	switch {
	case c.NTrial == 0 || c.NBase == 0:
		return "undecided (nothing to compare)"
	case c.NTrial < 2 || c.NBase < 2:
		return "undecided (one launch: estimate only)"
	case c.MoreLaunches > 0:
		return "undecided (" + c.needs("") + ")"
	}
	return "undecided"
}

// holm is "after correcting for the number of comparisons" where the
// interval shown lies beyond the band and yet Holm's correction over the
// rows left "by more than δ" unresolved (CorrectedBeyond): the interval
// printed is each row's own, at the uncorrected level.
func (c Comparison) holm() string {
	if c.Practical != Unresolved || !c.Bounded() {
		return ""
	}
	if u := 1 + c.Threshold; c.Lo > u || c.Hi < 1/u {
		return " after correcting for the number of comparisons (Holm)"
	}
	return ""
}

// needs is "needs ~N more launches" after sep, or "" when there is no estimate.
func (c Comparison) needs(sep string) string {
	switch {
	case c.MoreLaunches >= maxMore:
		return fmt.Sprintf("%sneeds > %d more launches", sep, maxMore)
	case c.MoreLaunches == 1:
		return sep + "needs ~1 more launch"
	case c.MoreLaunches > 0:
		return fmt.Sprintf("%sneeds ~%d more launches", sep, c.MoreLaunches)
	}
	return ""
}

// pct1 is a fraction as a percentage with one decimal, without the sign: 0.0213 -> "2.1".
func pct1(f float64) string { return fmt.Sprintf("%.1f", 100*math.Abs(f)) }

// RatioText is the ratio with its interval: "1.24× [1.13, 1.38]", or "1.24×"
// alone when there is no interval. It prints as many decimals (2 to 4) as
// keep the three numbers apart: "1.086× [1.085, 1.086]" rather than
// "1.09× [1.09, 1.09]".
//
// It also keeps each printed bound on its own side of 1 and of the band's
// edges 1/(1+δ) and 1+δ: a lower bound of 0.9540 against the edge 0.9524
// prints "0.954", not "0.95", which would read as outside the band.
func (c Comparison) RatioText() string {
	if !c.Bounded() {
		return RatioText(c.Ratio)
	}
	edges := []float64{1}
	if c.Threshold > 0 {
		edges = append(edges, 1/(1+c.Threshold), 1+c.Threshold)
	}
	sameSide := func(v float64, printed string) bool {
		p, err := strconv.ParseFloat(printed, 64)
		if err != nil {
			return true
		}
		for _, e := range edges {
			if (v < e) != (p < e) || (v > e) != (p > e) {
				return false
			}
		}
		return true
	}
	for dec := 2; dec <= 4; dec++ {
		lo, r, hi := ratioDec(c.Lo, dec), ratioDec(c.Ratio, dec), ratioDec(c.Hi, dec)
		apart := (lo != r || c.Lo == c.Ratio) && (hi != r || c.Hi == c.Ratio)
		if apart && sameSide(c.Lo, lo) && sameSide(c.Hi, hi) || dec == 4 {
			return fmt.Sprintf("%s× [%s, %s]", r, lo, hi)
		}
	}
	return "" // unreachable
}

// ratioDec is ratioNum with dec decimals in [0.1, 100).
func ratioDec(r float64, dec int) string {
	if r != 0 && (r < 0.1 || r >= 100) {
		return strconv.FormatFloat(r, 'g', dec+1, 64)
	}
	return strconv.FormatFloat(r, 'f', dec, 64)
}

// Text is the ratio, its interval and the verdict: "1.24× [1.13, 1.38] faster".
func (c Comparison) Text() string { return c.RatioText() + " " + c.VerdictText() }

// PText is "p=0.012", "p<0.001", or "no p-value" when not testable.
func (c Comparison) PText() string {
	switch {
	case math.IsNaN(c.P):
		return "no p-value"
	case c.P < 0.001:
		return "p<0.001"
	}
	return fmt.Sprintf("p=%.3f", c.P)
}

// RatioText is "1.24×".
func RatioText(r float64) string { return ratioNum(r) + "×" }

func ratioNum(r float64) string {
	if r != 0 && (r < 0.1 || r >= 100) {
		return strconv.FormatFloat(r, 'g', 3, 64)
	}
	return fmt.Sprintf("%.2f", r)
}

// PercentText is a fraction as a short percentage: 0.05 -> "5%", 0.025 -> "2.5%".
func PercentText(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e4)/100, 'f', -1, 64) + "%"
}
