package stats

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// Holm returns which of the p-values are rejected by Holm's step-down
// procedure at family-wise level alpha: sorted ascending, p(i) is rejected
// while p(i) <= alpha/(m-i). NaN p-values (not testable) are never rejected
// and do not count towards m.
func Holm(ps []float64, alpha float64) []bool {
	idx := make([]int, 0, len(ps))
	for i, p := range ps {
		if p == p { // not NaN
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]bool, len(ps))
	m := len(idx)
	for k, i := range idx {
		if ps[i] > alpha/float64(m-k) {
			break
		}
		out[i] = true
	}
	return out
}

// Corrected is a comparison decided as one of a family: a faster/slower
// verdict stands only if its test survives Holm's correction (rejected).
// One that does not falls back to the band check: "within δ" if its
// interval lies inside [1/(1+δ), 1+δ] (it cannot, under the
// equivalence-first rule, but a caller may pass any comparison), else
// undecided. Interval and ratio are unchanged; "within δ" verdicts are kept
// (they claim no effect).
func Corrected(c Comparison, rejected bool) Comparison {
	if (c.Verdict == Better || c.Verdict == Worse) && !rejected {
		c.Verdict, c.Practical = Undecided, ""
		if c.Bounded() {
			if v, p := verdictOf(c.Lo, c.Hi, c.Threshold); p == Within {
				c.Verdict, c.Practical = v, p
				return c
			}
		}
		c.Note = "not significant after correcting for the number of comparisons (Holm)"
	}
	return c
}

// BeyondP are the one-sided p-values of the comparison's two "by more than
// δ" claims, read off its own interval (the same t and standard error):
// better of H0 "ratio <= 1+δ", worse of H0 "ratio >= 1/(1+δ)". Small is
// evidence of the claim. NaN without an interval; 0 or 1 for an exact
// difference (no launch-to-launch variation).
func (c Comparison) BeyondP() (better, worse float64) {
	if !c.Bounded() || math.IsNaN(c.P) || !(c.Ratio > 0) {
		return math.NaN(), math.NaN()
	}
	d, u := math.Log(c.Ratio), math.Log(1+math.Max(c.Threshold, 0))
	if c.Lo == c.Hi {
		return b2p(d > u), b2p(d < -u)
	}
	se := (math.Log(c.Hi) - math.Log(c.Lo)) / (2 * tQuantile(c.Confidence, c.DF))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: c.DF}
	return 1 - t.CDF((d-u)/se), t.CDF((d + u) / se)
}

// b2p is an exact test's p-value: 0 when the claim holds, else 1.
func b2p(holds bool) float64 {
	if holds {
		return 0
	}
	return 1
}

// CorrectedBeyond is a comparison's "by more than δ" decided as one of a
// family: faster (slower) by more than δ stands only if the one-sided test
// against the band's edge (BeyondP) survives Holm's correction over the
// rows (betterRejected, worseRejected). One that does not keeps its
// direction with its size against δ unresolved ("faster, by 2.0–8.0% (more
// than 5% not shown)"): each row's interval is at the uncorrected level, so
// of ten rows at exactly 1+δ one would be called beyond δ far more often
// than the family's α.
func CorrectedBeyond(c Comparison, betterRejected, worseRejected bool) Comparison {
	if c.Practical != Beyond || (c.Verdict == Better && betterRejected) || (c.Verdict == Worse && worseRejected) {
		return c
	}
	if c.Verdict == Better || c.Verdict == Worse {
		c.Practical = Unresolved // VerdictText says why (holm)
	}
	return c
}
