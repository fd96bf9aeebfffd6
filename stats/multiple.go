package stats

import "sort"

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
