package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/casestudy/casestudy/stats"
)

// WriteRunSummary is the plain-text summary that ends `casestudy run`: one
// line per trial with its number, launches, comparison with the baseline and
// verdict (the report's numbers, words and formatter), then the winner in
// one line, "micro_batch=32: 1.24× [1.13, 1.38] faster", with the headline's
// correction for picking the best.
func WriteRunSummary(w io.Writer, s *Summary) error {
	if err := WriteTrialLines(w, s); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", WinnerLine(s))
	return err
}

// WriteTrialLines is WriteRunSummary's table without the winner: one line
// per trial (a run that stopped early has no winner yet).
func WriteTrialLines(w io.Writer, s *Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "trial\tknobs\t%s\tlaunches\tvs baseline (%s interval)\tverdict\n", s.Metric.Unit, PercentConf(s.Confidence))
	for i := range s.Trials {
		t := &s.Trials[i]
		knobs := knobList(changedKnobs(t))
		if t.Baseline {
			knobs = "baseline"
		}
		if !t.OK() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\n", t.ID, knobs, t.Outcome)
			continue
		}
		vs, verdict, _ := vsCells(t)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, knobs, Num(t.Value.Center), launchesText(t), vs, verdict)
	}
	return tw.Flush()
}

// WinnerLine is the headline in one line: "winner: micro_batch=32: 1.24×
// [1.13, 1.38] faster (98.9% interval, corrected for picking the best of 9
// trials)", or why there is none.
func WinnerLine(s *Summary) string {
	h := s.Headline
	switch {
	case h.Status == HeadlineNoTrials:
		return "winner: none: " + h.Text
	case h.Status == HeadlineNoBaseline:
		return fmt.Sprintf("winner: %s (%s) at %s %s; the baseline did not finish, so nothing to compare it with",
			knobList(h.BestKnobs), h.Best, Num(h.BestValue.Center), h.Unit)
	case h.BestIsBase && h.Comparisons == 0:
		return fmt.Sprintf("winner: none: only the baseline ran (%s %s)", Num(h.BestValue.Center), h.Unit)
	case h.BestIsBase:
		return fmt.Sprintf("winner: none: the baseline has the best estimate (%s %s); no swept setting beat it", Num(h.BestValue.Center), h.Unit)
	case h.Comparison == nil:
		return "winner: " + h.Text
	case !h.Comparison.Winner():
		return fmt.Sprintf("winner: none by more than %s: the best, %s, is %s (%s)", stats.PercentText(h.Comparison.Threshold),
			knobList(h.BestKnobs), h.Comparison.Text(), headlineQualifier(*h.Comparison, h.Comparisons))
	}
	return fmt.Sprintf("winner: %s: %s (%s)", knobList(h.BestKnobs), h.Comparison.Text(), headlineQualifier(*h.Comparison, h.Comparisons))
}
