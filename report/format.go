package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/casestudy/casestudy/internal/units"
	"github.com/casestudy/casestudy/stats"
)

// Num formats a measurement with 3-4 significant digits (units.Num): the
// one formatter of every number a trial shows, in the terminal too.
func Num(v float64) string { return units.Num(v) }

// Interval is "lo–hi" of a trial's value, or "one launch" without an interval.
func Interval(e stats.Value) string {
	if !e.Bounded() {
		return "one launch"
	}
	return Num(e.Lo) + "–" + Num(e.Hi)
}

// PctRange is the half-width of a value's interval relative to its center,
// benchstat style: "±3%", or "±∞".
func PctRange(e stats.Value) string {
	if !e.Bounded() || e.Center == 0 {
		return "±∞"
	}
	w := 100 * math.Max(e.Hi/e.Center-1, 1-e.Lo/e.Center)
	switch {
	case w >= 100: // asymmetric and wide: the bounds say more than a half-width
		return fmt.Sprintf("[%s, %s]", Num(e.Lo), Num(e.Hi))
	case w < 0.1:
		return fmt.Sprintf("±%.2f%%", w)
	case w < 10:
		return fmt.Sprintf("±%.1f%%", w)
	}
	return fmt.Sprintf("±%.0f%%", w)
}

// Ratio is "1.42×".
func Ratio(r float64) string { return fmt.Sprintf("%.2f×", r) }

// Percent is 0.4123 -> "41.2%".
func Percent(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// SI is a large count with a metric prefix: 508754 -> "508.8k", 1.2e6 -> "1.20M".
func SI(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return Num(v)
}

// vsCells are a trial's comparison with the baseline: "1.24× [1.13, 1.38]",
// its verdict and p; "baseline" for the baseline itself.
func vsCells(t *Trial) (vs, verdict, p string) {
	switch {
	case t.Baseline:
		return "baseline", "", ""
	case t.VsBaseline == nil:
		return "—", "", ""
	}
	c := t.VsBaseline
	return c.RatioText(), c.VerdictText(), c.PText()
}

// launchesText is the number of clean launches, with those left out.
func launchesText(t *Trial) string {
	n := fmt.Sprint(t.Value.N)
	if x := len(t.Launches.Excluded); x > 0 {
		n += fmt.Sprintf(" (+%d left out)", x)
	}
	return n
}

// MethodText says how the trials' numbers and verdicts are computed.
func MethodText(s *Summary) string {
	d := s.Design
	// rate is each comparison's false-positive rate: the design's α, which
	// repeats: auto splits over its looks (d.LookAlpha per look, the level of
	// the intervals, s.Confidence) so that the comparison as a whole keeps it.
	rate := d.Alpha
	if rate <= 0 {
		rate = stats.Alpha
	}
	var design string
	if d.Auto {
		design = fmt.Sprintf("repeats: auto (%d to %d launches a trial, looks at rounds %s; %s per look, so that "+
			"peeking keeps the false-positive rate of each comparison at %s; a trial stops once it is within δ or "+
			"beyond it)", d.MinRepeats, d.MaxRepeats, intsText(d.Looks),
			stats.PercentText(d.LookAlpha), stats.PercentText(rate))
	} else {
		design = fmt.Sprintf("%s a trial", nLaunches(d.Repeats))
	}
	// Only a comparison with an interval can give a false verdict: one with
	// a single launch on a side is an estimate, undecided whatever it shows.
	k, all := 0, 0
	for i := range s.Trials {
		if c := s.Trials[i].VsBaseline; c != nil {
			all++
			if c.Bounded() {
				k++
			}
		}
	}
	family := ""
	if k > 1 {
		which := fmt.Sprintf("%d comparisons", k)
		if k < all {
			which += " that can reach a verdict (the others have one launch on a side)"
		}
		rule := "The rate holds per comparison"
		if !d.Auto {
			rule = fmt.Sprintf("The false-positive rate of each comparison is %s, and it holds per comparison", stats.PercentText(rate))
		}
		family = fmt.Sprintf(" %s: with %s expect up to %.2g false verdicts when nothing changed.", rule, which, float64(k)*rate)
	}
	delta := s.Threshold()
	return fmt.Sprintf("Each launch (a separate process) gives one value of %s; a trial's number is the geometric mean "+
		"over its clean launches, with a %s t interval. \"vs baseline\" is the ratio of geometric means (better > 1) "+
		"with a %s Welch interval on log values, judged against δ = %s (%s faster, or a %s longer step: %s throughput), "+
		"equivalence first: \"within ±%s\" when the interval lies inside [%s, %s]; faster or slower \"by more than %s\" "+
		"when it lies wholly beyond the band (only these name a winner); faster or slower with \"more than %s not shown\" "+
		"when it excludes 1 but holds a band edge; else undecided. Design: %s.%s "+
		"One launch gives an estimate only: no interval, no p-value.%s",
		s.Metric.Unit, PercentConf(s.Confidence), PercentConf(s.Confidence), stats.PercentText(delta),
		stats.RatioText(1+delta), stats.RatioText(1+delta), stats.RatioText(1/(1+delta)), stats.PercentText(delta),
		ratio3(1/(1+delta)), ratio3(1+delta), stats.PercentText(delta), stats.PercentText(delta), design, family,
		basisText(s.ValueBasis))
}

func ratio3(r float64) string { return fmt.Sprintf("%.3f", r) }

// launchesWord is "launch" for one, "launches" otherwise.
func launchesWord(n int) string {
	if n == 1 {
		return "launch"
	}
	return "launches"
}

// nLaunches is a count of launches: "1 launch", "5 launches".
func nLaunches(n int) string { return fmt.Sprintf("%d %s", n, launchesWord(n)) }

// vsLaunches is a comparison's launch counts: "5 vs 6 launches", "1 vs 1 launch".
func vsLaunches(trial, base int) string {
	return fmt.Sprintf("%d vs %d %s", trial, base, launchesWord(max(trial, base)))
}

func intsText(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
