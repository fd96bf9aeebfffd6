package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// History is the objective of every trial of one study over many runs.
type History struct {
	Dir      string
	Study    string
	Metric   stats.Metric // of the latest run; runs with another objective are left out
	Runs     []HistoryRun
	Trials   []HistoryTrial // in first-seen plan order
	Warnings []string
	// Level is what "last vs first" is decided at: compare's (90% pooled
	// t: the same configuration on both sides) and the latest run's
	// compare.threshold (else DefaultThreshold).
	Level stats.Level
	// ChangeLevel is the level each trial's change-point test ran at
	// (ChangeAlpha over the ChangeTested trials tested; history_changes.go).
	ChangeLevel  float64
	ChangeTested int
}

// HistoryRun is one run directory of the history.
type HistoryRun struct {
	Dir     string
	RunID   string
	Created time.Time
	Report  string // its report.html relative to the history's output (LinkRuns); "" when none
}

// HistoryTrial is one trial across the runs; Points[i] belongs to Runs[i].
type HistoryTrial struct {
	ID     string
	Knobs  string
	Points []HistoryPoint
	// Drift compares the trial's launches in the last run where it finished
	// with the first one: last against first over launches, at History.Level
	// (compare's 90% Student t interval, pooled variance; nil when it
	// finished in fewer than two runs).
	Drift *stats.Comparison
	// Changes are the change points of its values over the runs (Index:
	// the first run after the change), tested at History.ChangeLevel.
	Changes []stats.ChangePoint
}

// HistoryPoint is a trial's value in one run (Value.N = 0: no measurement).
type HistoryPoint struct {
	Outcome  store.Outcome
	Value    stats.Value
	launches []float64
}

// LoadHistory reads every run directory directly under dir (a
// results/<study>/ folder), oldest first. It charts only runs that compare
// would compare with the latest one (comparable: the same model and preset,
// device and steps, GPU model, objective and scale) and each run once, by
// run ID (a copied run directory would count twice); the others are left
// out with a warning that names the run and the reason.
func LoadHistory(dir string) (*History, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (give the folder that holds the runs of one study, e.g. results/<study>)", dir, err)
	}
	h := &History{Dir: dir}
	var sums []*Summary
	rehearsals := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") { // .<run>.new: a run being created, or one a kill left half made
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "manifest.json")); err != nil {
			continue // not a run directory
		}
		run, err := store.ReadRun(p)
		if err != nil {
			h.Warnings = append(h.Warnings, fmt.Sprintf("skipped %s: %v", p, err))
			continue
		}
		if run.Manifest.IsRehearsal() {
			h.Warnings = append(h.Warnings, fmt.Sprintf("skipped %s: a rehearsal (%s) is no point of history", p, store.RehearsalNote))
			rehearsals++
			continue
		}
		sums = append(sums, Build(run, nil))
		h.Runs = append(h.Runs, HistoryRun{Dir: p, RunID: run.Manifest.RunID, Created: run.Manifest.Created.UTC()})
	}
	if len(sums) == 0 && rehearsals > 0 {
		return nil, fmt.Errorf("%s holds only rehearsals (%d; %s): no measured run to chart", dir, rehearsals, store.RehearsalNote)
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("%s holds no run directories (folders with a manifest.json)", dir)
	}
	idx := make([]int, len(sums))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return h.Runs[idx[a]].Created.Before(h.Runs[idx[b]].Created) })
	runs := make([]HistoryRun, len(idx))
	sorted := make([]*Summary, len(idx))
	for i, j := range idx {
		runs[i], sorted[i] = h.Runs[j], sums[j]
	}
	h.Runs, sums = runs, sorted
	h.Runs, sums = h.keepComparable(h.Runs, sums)
	h.Study = sums[len(sums)-1].Study
	h.Metric = sums[len(sums)-1].Metric
	h.Level = stats.Level{Confidence: 1 - 2*stats.Alpha, Threshold: DefaultThreshold, Pooled: true}
	if th := sums[len(sums)-1].CompareThreshold; th > 0 {
		h.Level.Threshold = th
	}

	byID := map[string]int{}
	for ri, s := range sums {
		if s.Study != h.Study {
			h.Warnings = append(h.Warnings, fmt.Sprintf("%s is a run of study %q, not %q", h.Runs[ri].Dir, s.Study, h.Study))
		}
		for _, t := range s.Trials {
			i, ok := byID[t.ID]
			if !ok {
				i = len(h.Trials)
				byID[t.ID] = i
				h.Trials = append(h.Trials, HistoryTrial{ID: t.ID, Knobs: labelOf(&t), Points: make([]HistoryPoint, len(sums))})
			}
			p := HistoryPoint{Outcome: t.Outcome}
			if t.OK() {
				p.Value, p.launches = t.Value, t.Launches.Values
			}
			h.Trials[i].Points[ri] = p
		}
	}
	for i := range h.Trials {
		h.Trials[i].Drift = drift(h.Trials[i].Points, h.Metric, h.Level)
	}
	h.setChangePoints()
	return h, nil
}

// runIDs remembers the entry each run ID was first read from: a history
// counts a run once, however many copies of it a folder holds (compare's
// --history and the history view alike).
type runIDs map[string]string

// again says whether run id was read already, and from which entry; else it
// remembers name for id. A run without an ID is never a copy.
func (r runIDs) again(id, name string) (string, bool) {
	if id == "" {
		return "", false
	}
	if first, ok := r[id]; ok {
		return first, true
	}
	r[id] = name
	return "", false
}

// keepComparable drops the copies of a run read already (by run ID, the
// first in time order kept, as LoadGateHistory does) and then every run that
// compare would refuse against the latest one (comparable), each with a
// warning. runs and sums are in time order, one to one.
func (h *History) keepComparable(runs []HistoryRun, sums []*Summary) ([]HistoryRun, []*Summary) {
	seen := runIDs{}
	var keptRuns []HistoryRun
	var keptSums []*Summary
	for i, r := range runs {
		if first, dup := seen.again(r.RunID, r.Dir); dup {
			h.Warnings = append(h.Warnings, fmt.Sprintf("left out %s: run %s again (a copy of %s); each run counts once", r.Dir, r.RunID, first))
			continue
		}
		keptRuns, keptSums = append(keptRuns, r), append(keptSums, sums[i])
	}
	last := len(keptSums) - 1
	latest := keptSums[last]
	runs, sums = keptRuns[:0:0], keptSums[:0:0]
	for i, s := range keptSums {
		if i != last {
			if err := comparable(s, latest); err != nil {
				why := err.Error()
				var nc *NotComparableError
				if errors.As(err, &nc) {
					why = strings.Join(nc.Reasons, "; ")
				}
				h.Warnings = append(h.Warnings, fmt.Sprintf("left out %s (run %s): compare would refuse it against the latest run %s (OLD: this run, NEW: the latest): %s",
					keptRuns[i].Dir, keptRuns[i].RunID, keptRuns[last].RunID, why))
				continue
			}
		}
		runs, sums = append(runs, keptRuns[i]), append(sums, s)
	}
	return runs, sums
}

func drift(points []HistoryPoint, m stats.Metric, lv stats.Level) *stats.Comparison {
	first, last := -1, -1
	for i, p := range points {
		if p.Value.N > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || first == last {
		return nil
	}
	d := stats.Compare(points[last].launches, points[first].launches, m, lv)
	return &d
}
