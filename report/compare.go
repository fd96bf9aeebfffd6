package report

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Comparison is two runs of a study matched trial by trial: per trial, the
// new run's launches against the old run's (ratio of geometric means of the
// objective, Welch interval on log values, verdict against the threshold).
type Comparison struct {
	Old             Side         `json:"old"`
	New             Side         `json:"new"`
	Metric          stats.Metric `json:"metric"`
	Threshold       float64      `json:"threshold"`        // fraction: a slowdown beyond it is a regression
	ThresholdSource string       `json:"threshold_source"` // flag | study | default
	Confidence      float64      `json:"confidence"`       // of every row's interval
	Rows            []CompareRow `json:"rows"`
	Regressions     []string     `json:"regressions"` // trial IDs
	Improvements    []string     `json:"improvements"`
	OnlyOld         []string     `json:"only_old"` // trial IDs missing from NEW
	OnlyNew         []string     `json:"only_new"`
	Warnings        []string     `json:"warnings,omitempty"`
	Verdict         string       `json:"verdict"` // the one-line result

	// Gate is the outcome: regression (exit 1), inconclusive (exit 4:
	// a suspected or undecided row) or pass (exit 0: every row's lower bound
	// clears 1/(1+threshold)); see stats.Gate.
	Gate      string   `json:"gate"`
	Suspected []string `json:"suspected"` // trial IDs: estimate below 1/(1+threshold), not confirmed
	Undecided []string `json:"undecided"` // trial IDs the gate could not judge
	// History is the --history directory and how many comparable earlier
	// runs it held ("" and 0 without one).
	History     string `json:"history,omitempty"`
	HistoryRuns int    `json:"history_runs,omitempty"`
	// Changed is what differs between the runs' setups (compare_changes.go).
	Changed []ProvChange `json:"changed_between_runs"`
}

// Side names one input of a comparison.
type Side struct {
	Path    string `json:"path"`
	Study   string `json:"study"`
	RunID   string `json:"run_id"`
	Kind    string `json:"kind"` // summary (from a run dir or summary.json) or baseline
	Created string `json:"created"`
	Report  string `json:"report,omitempty"` // its report.html, relative to the comparison's folder (LinkReports)
}

// CompareRow is one trial in both runs.
type CompareRow struct {
	ID         string        `json:"id"`
	Knobs      string        `json:"knobs"` // the knobs that differ from the baseline, "baseline" for none
	OldOutcome store.Outcome `json:"old_outcome"`
	NewOutcome store.Outcome `json:"new_outcome"`
	Old        *stats.Value  `json:"old,omitempty"` // the trial's number in OLD (nil unless it finished)
	New        *stats.Value  `json:"new,omitempty"`
	// Change is NEW against OLD, launch by launch; its faster/slower
	// verdict stands only if it survives Holm's correction over the rows.
	Change *stats.Comparison `json:"change,omitempty"`
	// MannWhitney is benchstat's view of the same launches: change of the
	// medians and the U test (secondary).
	MannWhitney *stats.Delta `json:"mann_whitney,omitempty"`
	Regression  bool         `json:"regression"`
	Improved    bool         `json:"improved"`
	Note        string       `json:"note,omitempty"`

	// Gate is the row's judgement by the regression gate.
	Gate *stats.GateRow `json:"gate,omitempty"`
}

// NotComparableError says why two runs cannot be compared (exit status 2).
type NotComparableError struct{ Reasons []string }

func (e *NotComparableError) Error() string {
	return "the runs are not comparable: " + strings.Join(e.Reasons, "; ")
}

// LoadSide reads a run directory (summarised now, without checklist) or a
// summary/baseline JSON file.
func LoadSide(path string) (*Summary, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (give a run directory or a baseline file written by casestudy baseline)", path, err)
	}
	if fi.IsDir() {
		run, err := store.ReadRun(path)
		if err != nil {
			return nil, err
		}
		if run.Manifest.IsRehearsal() {
			return nil, store.RefuseRehearsal(path, "compare and export")
		}
		return Build(run, nil), nil
	}
	return ReadSummary(path)
}

// ParseThreshold reads "5%" or a fraction "0.05", the same rule as a study's
// compare.threshold (a bare number is a fraction, so "5" is refused rather than
// read as 500% or as 5%).
func ParseThreshold(s string) (float64, error) {
	t := strings.TrimSpace(s)
	p, pct := strings.CutSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
	if err != nil || !(v > 0) { // NaN too: every comparison with it is false, which would pass every gate
		return 0, fmt.Errorf("threshold %q is not a positive percentage: write it like 5%% or 0.05", s)
	}
	if pct {
		v /= 100
	}
	if v >= 1 {
		return 0, fmt.Errorf("threshold %q reads as 100%% or more: write it like 5%% or 0.05", s)
	}
	return v, nil
}

// Compare matches the trials of old and new by their stable IDs.
//
// Each row's verdict is the report's (equivalence first, at a 90% pooled
// Student t interval: the same configuration on both sides,
// stats.Level.Pooled), Holm-corrected over the rows per direction, and so is
// its "by more than the threshold" (decide); an improvement is faster by more
// than the threshold. The gate (stats.Gate, gate.go) judges regressions and
// fails closed: REGRESSION when a trial that finished in OLD fails in NEW or
// a one-sided 5% test (Holm over the rows) shows it below 1/(1+threshold);
// PASS only when a row was tested and every row's lower bound clears
// 1/(1+threshold); else SUSPECTED or UNDECIDED, and the run is inconclusive,
// as it is when a trial that finished in OLD is not in NEW.
//
// It refuses (NotComparableError) runs that measured different things
// (model, device, steps, GPU model, objective) and runs with no trial in
// common.
func Compare(old, new *Summary, oldPath, newPath string, threshold float64) (*Comparison, error) {
	return CompareWithHistory(old, new, oldPath, newPath, threshold, nil)
}

// CompareWithHistory is Compare with earlier comparable runs (LoadGateHistory)
// informing the gate (LoadGateHistory): a prediction interval at one launch a side, the
// between-run variance in the standard error otherwise.
func CompareWithHistory(old, new *Summary, oldPath, newPath string, threshold float64, history []*Summary) (*Comparison, error) {
	c := &Comparison{Old: side(old, oldPath), New: side(new, newPath), Metric: new.Metric, Threshold: threshold,
		Confidence: 1 - 2*stats.Alpha, Regressions: []string{}, Improvements: []string{}, OnlyOld: []string{}, OnlyNew: []string{},
		Suspected: []string{}, Undecided: []string{}, HistoryRuns: len(history)}
	if err := comparable(old, new); err != nil {
		return nil, err
	}
	c.Warnings = append(c.Warnings, scaleUnknown(old.Comparable, new.Comparable)...)
	if old.Study != new.Study {
		c.Warnings = append(c.Warnings, fmt.Sprintf("comparing different studies: %q and %q", old.Study, new.Study))
	}
	olds := map[string]*Trial{}
	for i := range old.Trials {
		olds[old.Trials[i].ID] = &old.Trials[i]
	}
	seen := map[string]bool{}
	var pairs [][2]*Trial
	level := stats.Level{Confidence: c.Confidence, Threshold: threshold, Pooled: true}
	for i := range new.Trials {
		nt := &new.Trials[i]
		ot, ok := olds[nt.ID]
		if !ok {
			c.OnlyNew = append(c.OnlyNew, nt.ID)
			continue
		}
		seen[nt.ID] = true
		c.Rows = append(c.Rows, compareTrial(ot, nt, c.Metric, level))
		pairs = append(pairs, [2]*Trial{ot, nt})
	}
	var missing []string // OLD's finished trials that NEW lacks, by name
	for i, t := range old.Trials {
		if !seen[t.ID] {
			c.OnlyOld = append(c.OnlyOld, t.ID)
			if t.Outcome == store.OK {
				missing = append(missing, gateName(CompareRow{ID: t.ID, Knobs: labelOf(&old.Trials[i])}))
			}
		}
	}
	sort.Strings(c.OnlyOld)
	sort.Strings(c.OnlyNew)
	if len(c.Rows) == 0 {
		return nil, &NotComparableError{Reasons: []string{fmt.Sprintf(
			"no trial in common (%d trials in OLD, %d in NEW, matched by ID): the studies sweep different configurations",
			len(old.Trials), len(new.Trials))}}
	}
	c.Changed = changedBetween(old, new)
	c.decide()
	c.gate(pairs, history, missing)
	return c, nil
}

// comparable checks that old and new measured the same thing.
func comparable(old, new *Summary) error {
	var why []string
	check := func(what, o, n string) {
		if o != n && o != "" && n != "" {
			why = append(why, fmt.Sprintf("%s differs (OLD %s, NEW %s)", what, o, n))
		}
	}
	check("the model", old.Comparable.Model, new.Comparable.Model)
	check("the measurement", old.Comparable.Workload, new.Comparable.Workload)
	check("the GPU model", old.Comparable.GPU, new.Comparable.GPU)
	if (old.Comparable.GPU == "") != (new.Comparable.GPU == "") {
		why = append(why, fmt.Sprintf("one run is on GPUs (%s), the other on the CPU", old.Comparable.GPU+new.Comparable.GPU))
	}
	check("the objective", old.Metric.Name, new.Metric.Name)
	why = append(why, scaleDiffers(old.Comparable, new.Comparable)...) // GPUs, nodes, ranks, threads, world of one
	if len(why) == 0 {
		return nil
	}
	return &NotComparableError{Reasons: why}
}

func side(s *Summary, path string) Side {
	return Side{Path: path, Study: s.Study, RunID: s.RunID, Kind: s.Kind, Created: s.Created.Format("2006-01-02 15:04 UTC")}
}

func compareTrial(ot, nt *Trial, m stats.Metric, level stats.Level) CompareRow {
	row := CompareRow{ID: nt.ID, Knobs: labelOf(nt), OldOutcome: ot.Outcome, NewOutcome: nt.Outcome}
	if ot.OK() {
		v := ot.Value
		row.Old = &v
	}
	if nt.OK() {
		v := nt.Value
		row.New = &v
	}
	switch {
	case ot.OK() && !nt.OK() && nt.Outcome == store.OK: // ran, every launch tainted: the gate's note says so
		return row
	case ot.OK() && !nt.OK():
		row.Regression = true
		row.Note = fmt.Sprintf("finished before, now %s: %s", nt.Outcome, nt.Error)
		return row
	case !ot.OK() && ot.Outcome == store.OK: // finished in OLD without a clean launch: the gate's note says so
		if nt.Outcome != store.OK {
			row.Note = fmt.Sprintf("now %s: %s", nt.Outcome, nt.Error)
		}
		return row
	case !ot.OK() && nt.OK():
		row.Note = fmt.Sprintf("was %s, now finishes", ot.Outcome)
		return row
	case !ot.OK() && !nt.OK():
		row.Note = fmt.Sprintf("did not finish in either run (%s, %s)", ot.Outcome, nt.Outcome)
		return row
	}
	ch := stats.Compare(nt.Launches.Values, ot.Launches.Values, m, level)
	row.Change = &ch
	mw := stats.MannWhitney(ot.Launches.Values, nt.Launches.Values)
	row.MannWhitney = &mw
	if ch.Note != "" {
		row.Note = ch.Note
	}
	return row
}

// decide applies Holm's correction over the rows' one-sided tests, per
// direction, to the rows' verdicts, and marks improvements beyond the
// threshold; regressions are the gate's (gate.go). "By more than the
// threshold" is corrected too, by Holm over the one-sided tests against the
// band's edge (stats.BeyondP): read off each row's uncorrected 90% interval
// alone, ten trials at exactly 1+threshold gave at least one "faster by more
// than 5%" in 40% of simulated runs at 3 launches a side.
func (c *Comparison) decide() {
	var idx []int
	var slower, faster, beyondBetter, beyondWorse []float64
	for i, r := range c.Rows {
		if r.Change != nil {
			idx = append(idx, i)
			p := r.Change.P / 2 // one-sided, in the direction of the estimate
			if r.Change.Ratio < 1 {
				slower, faster = append(slower, p), append(faster, 1-p)
			} else {
				slower, faster = append(slower, 1-p), append(faster, p)
			}
			b, w := r.Change.BeyondP()
			beyondBetter, beyondWorse = append(beyondBetter, b), append(beyondWorse, w)
		}
	}
	alpha := (1 - c.Confidence) / 2
	rejSlower, rejFaster := stats.Holm(slower, alpha), stats.Holm(faster, alpha)
	rejBetter, rejWorse := stats.Holm(beyondBetter, alpha), stats.Holm(beyondWorse, alpha)
	for k, i := range idx {
		r := &c.Rows[i]
		ch := stats.CorrectedBeyond(stats.Corrected(*r.Change, rejSlower[k] || rejFaster[k]), rejBetter[k], rejWorse[k])
		r.Change = &ch
		if ch.Note != "" {
			r.Note = ch.Note
		}
		r.Improved = ch.Winner() // faster by more than the threshold, after Holm
	}
	for _, r := range c.Rows {
		if r.Improved {
			c.Improvements = append(c.Improvements, r.ID)
		}
	}
}
