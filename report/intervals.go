package report

import "fmt"

// bounds is an interval with as many decimals (2 to 5) as tell its ends
// apart: [1.09, 1.09] would read as no interval at all.
func bounds(lo, hi float64) string {
	d := 2
	for d < 5 && fmt.Sprintf("%.*f", d, lo) == fmt.Sprintf("%.*f", d, hi) {
		d++
	}
	return fmt.Sprintf("[%.*f, %.*f]", d, lo, d, hi)
}

// intervalNote explains why the headline and the trials table give the best
// trial two intervals (review L2): the headline's is corrected for picking
// the best of K trials, the table's is the trial's own comparison. "" when
// they are the same (one comparison, or no interval).
func intervalNote(s *Summary) string {
	h := s.Headline
	c := h.Comparison
	if c == nil || h.Comparisons <= 1 || !c.Bounded() {
		return ""
	}
	for i := range s.Trials {
		t := &s.Trials[i]
		if t.ID != h.Best || t.VsBaseline == nil || !t.VsBaseline.Bounded() {
			continue
		}
		v := t.VsBaseline
		return fmt.Sprintf("Two intervals for one ratio: the headline's %s interval %s is corrected for picking the best of %d trials "+
			"(a winner picked from many looks better by chance); the trials table gives the same trial's own %s interval %s, "+
			"the one every other row has.", PercentConf(c.Confidence), bounds(c.Lo, c.Hi), h.Comparisons, PercentConf(v.Confidence), bounds(v.Lo, v.Hi))
	}
	return ""
}
