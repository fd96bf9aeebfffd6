package report

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/stats"
)

// ChangeAlpha is the false-alarm rate of history's change-point test over
// all the trials it watches (Bonferroni: each trial is tested at
// ChangeAlpha / trials).
const ChangeAlpha = 0.05

// changeMinRuns is the fewest finished runs a trial needs for the test (three
// on either side of a change).
const changeMinRuns = 6

// setChangePoints runs the change-point test (stats.FindChangePoints) on
// every trial's values over the runs where it finished.
func (h *History) setChangePoints() {
	tested := 0
	for _, t := range h.Trials {
		if finishedRuns(t) >= changeMinRuns {
			tested++
		}
	}
	h.ChangeLevel = 0
	if tested > 0 {
		h.ChangeLevel = ChangeAlpha / float64(tested)
	}
	for i := range h.Trials {
		t := &h.Trials[i]
		t.Changes = nil
		if finishedRuns(*t) < changeMinRuns {
			continue
		}
		var xs []float64
		var runOf []int
		for ri, p := range t.Points {
			if p.Value.N > 0 {
				xs = append(xs, p.Value.Center)
				runOf = append(runOf, ri)
			}
		}
		for _, cp := range stats.FindChangePoints(xs, stats.ChangePointOptions{Alpha: h.ChangeLevel, Seed: 1}) {
			if !h.Metric.HigherIsBetter {
				cp.Ratio = 1 / cp.Ratio // "better > 1", as every ratio of the reports
			}
			cp.Index = runOf[cp.Index]
			t.Changes = append(t.Changes, cp)
		}
	}
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

// changeText is "run 8 (2026-12-14 02:00): 0.85× (p=0.001)" per change point.
func (h *History) changeText(t HistoryTrial) string {
	var parts []string
	for _, cp := range t.Changes {
		parts = append(parts, fmt.Sprintf("run %d (%s): %s (p=%.3f)", cp.Index+1, h.Runs[cp.Index].Created.Format("2006-01-02 15:04"),
			stats.RatioText(cp.Ratio), cp.P))
	}
	if len(parts) == 0 {
		if finishedRuns(t) < changeMinRuns {
			return "too few runs"
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
