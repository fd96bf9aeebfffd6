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

// VerdictText is the verdict in words: "faster", "slower", "no difference
// larger than 5%", "undecided (needs ~12 more launches)" or "undecided (one
// launch: estimate only)".
func (c Comparison) VerdictText() string {
	switch c.Verdict {
	case Better:
		if c.Metric.Speed() {
			return "faster"
		}
		return "less memory"
	case Worse:
		if c.Metric.Speed() {
			return "slower"
		}
		return "more memory"
	case NoDifference:
		return "no difference larger than " + PercentText(c.Threshold)
	}
	switch {
	case c.NTrial == 0 || c.NBase == 0:
		return "undecided (nothing to compare)"
	case c.NTrial < 2 || c.NBase < 2:
		return "undecided (one launch: estimate only)"
	case c.MoreLaunches >= maxMore:
		return fmt.Sprintf("undecided (needs > %d more launches)", maxMore)
	case c.MoreLaunches == 1:
		return "undecided (needs ~1 more launch)"
	case c.MoreLaunches > 0:
		return fmt.Sprintf("undecided (needs ~%d more launches)", c.MoreLaunches)
	}
	return "undecided"
}

// RatioText is the ratio with its interval: "1.24× [1.13, 1.38]", or "1.24×"
// alone when there is no interval.
func (c Comparison) RatioText() string {
	if !c.Bounded() {
		return RatioText(c.Ratio)
	}
	return fmt.Sprintf("%s [%s, %s]", RatioText(c.Ratio), ratioNum(c.Lo), ratioNum(c.Hi))
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
