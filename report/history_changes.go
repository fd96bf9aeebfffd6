package report

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/casestudy/casestudy/stats"
)

// ChangeAlpha is the false-alarm rate of history's change-point test over
// all the trials it watches (Bonferroni: each trial is tested at
// ChangeAlpha / trials).
const ChangeAlpha = 0.05

// changeMinRuns is the fewest finished runs a trial needs for the test (three
// on either side of a change).
const changeMinRuns = 6

// changeOptions are the options of each trial's test: at ChangeLevel, with
// the permutations that level needs (stats.ChangePointOptions), seeded.
func (h *History) changeOptions() stats.ChangePointOptions {
	return stats.ChangePointOptions{Alpha: h.ChangeLevel, MinSegment: changeMinRuns / 2, Seed: 1}
}

// setChangePoints runs the change-point test (stats.FindChangePoints) on
// every trial's values over the runs where it finished, the trials in
// parallel (each is seeded alike, so the answer does not depend on the
// order: a step in every trial costs about K²·n·log n for K trials).
func (h *History) setChangePoints() {
	tested := 0
	for _, t := range h.Trials {
		if finishedRuns(t) >= changeMinRuns {
			tested++
		}
	}
	h.ChangeLevel, h.ChangeTested = 0, tested
	if tested > 0 {
		h.ChangeLevel = ChangeAlpha / float64(tested)
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range h.Trials {
		t := &h.Trials[i]
		t.Changes = nil
		if finishedRuns(*t) < changeMinRuns {
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			h.trialChanges(t)
		}()
	}
	wg.Wait()
}

// trialChanges sets t.Changes: the change points of its values over the
// runs where it finished.
func (h *History) trialChanges(t *HistoryTrial) {
	var xs []float64
	var runOf []int
	for ri, p := range t.Points {
		if p.Value.N > 0 {
			xs = append(xs, p.Value.Center)
			runOf = append(runOf, ri)
		}
	}
	for _, cp := range stats.FindChangePoints(xs, h.changeOptions()) {
		if !h.Metric.HigherIsBetter {
			cp.Ratio = 1 / cp.Ratio // "better > 1", as every ratio of the reports
		}
		cp.Index = runOf[cp.Index]
		t.Changes = append(t.Changes, cp)
	}
}

// changeReachText says which changes the test can flag, for the method
// line: with the most finished runs of a trial tested, how many runs a
// change needs after it (a change in the runs before that cannot be flagged
// yet), or how many runs it takes before any change can be.
func (h *History) changeReachText() string {
	most := 0
	for _, t := range h.Trials {
		most = max(most, finishedRuns(t))
	}
	opt := h.changeOptions().WithDefaults()
	if k := stats.ChangePointReach(most, opt); k > 0 {
		return fmt.Sprintf("with %d finished runs a change needs %d runs or more after it (and before it) to reach that level, "+
			"so one in the last %s cannot be flagged yet", most, k, countText(k-1, "run"))
	}
	need := stats.ChangePointRunsNeeded(opt, 10000)
	return fmt.Sprintf("with at most %d finished runs no change can reach that level (cannot detect): that takes %d finished runs or more, "+
		"and a change needs %d runs or more after it (and before it) even then", most, need, opt.MinSegment)
}

// countText is "1 trial" or "5 trials".
func countText(n int, noun string) string {
	return fmt.Sprintf("%d %s", n, plural(n, noun, noun+"s"))
}

func finishedRuns(t HistoryTrial) int {
	n := 0
	for _, p := range t.Points {
		if p.Value.N > 0 {
			n++
		}
	}
	return n
}

// Last keeps the newest n runs (n <= 0 keeps all) and computes the drift
// and change points again over them.
func (h *History) Last(n int) {
	if n <= 0 || n >= len(h.Runs) {
		return
	}
	drop := len(h.Runs) - n
	h.Runs = h.Runs[drop:]
	kept := h.Trials[:0]
	for _, t := range h.Trials {
		t.Points = t.Points[drop:]
		if finishedRuns(t) > 0 || anyOutcome(t) {
			t.Drift = drift(t.Points, h.Metric, h.Level)
			kept = append(kept, t)
		}
	}
	h.Trials = kept
	h.setChangePoints()
}

func anyOutcome(t HistoryTrial) bool {
	for _, p := range t.Points {
		if p.Outcome != "" {
			return true
		}
	}
	return false
}

// changeText is "run 8 (2026-12-14 02:00): 0.85× (p=0.001)" per change
// point; without one, "too few runs" (fewer than changeMinRuns finished),
// "cannot detect (N runs, K trials)" when no split of its N finished runs
// can reach the level of K trials (stats.ChangePointReach), else "none".
func (h *History) changeText(t HistoryTrial) string {
	var parts []string
	for _, cp := range t.Changes {
		parts = append(parts, fmt.Sprintf("run %d (%s): %s (p=%.3f)", cp.Index+1, h.Runs[cp.Index].Created.Format("2006-01-02 15:04"),
			stats.RatioText(cp.Ratio), cp.P))
	}
	if len(parts) == 0 {
		n := finishedRuns(t)
		if n < changeMinRuns {
			return "too few runs"
		}
		if stats.ChangePointReach(n, h.changeOptions()) == 0 {
			return fmt.Sprintf("cannot detect (%d runs, %s)", n, countText(h.ChangeTested, "trial"))
		}
		return "none"
	}
	return strings.Join(parts, "; ")
}

// runLabels are the runs' column labels: date and time with the year,
// seconds added where two runs share a minute, and the run ID where they
// still collide.
func runLabels(runs []HistoryRun) []string {
	labels := make([]string, len(runs))
	count := map[string]int{}
	for i, r := range runs {
		labels[i] = r.Created.Format("2006-01-02 15:04")
		count[labels[i]]++
	}
	again := map[string]int{}
	for i, r := range runs {
		if count[labels[i]] > 1 {
			labels[i] = r.Created.Format("2006-01-02 15:04:05")
		}
		again[labels[i]]++
	}
	for i, r := range runs {
		if again[labels[i]] > 1 {
			labels[i] += " " + r.RunID
		}
	}
	return labels
}

// LinkRuns sets each run's Report: its report.html relative to the folder
// the history is written to (reportLink), when it has one.
func LinkRuns(h *History, outPath string) {
	for i := range h.Runs {
		h.Runs[i].Report = reportLink(h.Runs[i].Dir, outPath)
	}
}
