// Package console is what a person watching a run sees: a live progress
// display on a terminal (github.com/vbauerster/mpb) and one plain line per
// event elsewhere (CI logs, pipes), with the trial results in words.
package console

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// IsTerminal reports whether w is an interactive terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// TrialLabel is a trial's ID with the knobs it changes from the baseline.
func TrialLabel(rec *store.TrialRecord) string {
	return fmt.Sprintf("%s [%s]", rec.ID, ChangedKnobs(rec))
}

// ChangedKnobs is "micro_batch=32, precision=fp32", or "baseline".
func ChangedKnobs(rec *store.TrialRecord) string {
	if len(rec.Changed) == 0 {
		return "baseline"
	}
	return study.FormatKnobs(rec.Knobs, slices.Sorted(slices.Values(rec.Changed)))
}

// ResultText is a finished trial in words: "ok 1600 tokens/s over 3
// launches, step 80.00 ms" or "crashed: rank 1 was killed by SIGKILL". The
// value is the trial's one number in the objective's unit, the one the
// report and the end-of-run summary show (the geometric mean over its clean
// launches, runner.ValueText).
func ResultText(rec *store.TrialRecord) string {
	switch {
	case rec.Outcome == store.OK && rec.Summary != nil:
		s := fmt.Sprintf("ok %s, step %s ms", runner.ValueText(rec.Summary), report.Num(rec.Summary.StepMSMedian))
		if rec.Summary.Noisy {
			s += " (noisy)"
		}
		if rec.Throttled {
			s += " (throttled)"
		}
		return s
	case rec.Error != "":
		return fmt.Sprintf("%s: %s", rec.Outcome, firstLine(rec.Error))
	}
	return string(rec.Outcome)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return truncate(s, 160)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-3]) + "..."
	}
	return s
}
