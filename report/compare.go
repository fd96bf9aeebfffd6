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

// Comparison is two runs of a study matched trial by trial.
type Comparison struct {
	Old, New        Side
	Threshold       float64 // fraction: a significant slowdown beyond it is a regression
	ThresholdSource string  // flag | study | default
	Rows            []CompareRow
	Regressions     []string // trial IDs
	Improvements    []string
	OnlyOld         []string // trial IDs missing from NEW
	OnlyNew         []string
	Warnings        []string
}

// Side names one input of a comparison.
type Side struct {
	Path    string
	Study   string
	RunID   string
	Kind    string // summary (from a run dir or summary.json) or baseline
	Created string
}

// CompareRow is one trial in both runs.
type CompareRow struct {
	ID         string
	Knobs      string // the knobs that differ from the baseline, "baseline" for none
	OldOutcome store.Outcome
	NewOutcome store.Outcome
	Throughput *stats.Delta // nil unless both sides measured it
	StepTime   *stats.Delta
	Regression bool
	Improved   bool
	Note       string
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
	if err != nil || v <= 0 {
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

// Compare matches the trials of old and new by their stable IDs. A
// regression is a trial whose throughput dropped significantly (Mann-Whitney
// U at alpha 0.05) by more than threshold, or that finished in OLD and
// failed in NEW.
func Compare(old, new *Summary, oldPath, newPath string, threshold float64) *Comparison {
	c := &Comparison{Old: side(old, oldPath), New: side(new, newPath), Threshold: threshold}
	if old.Study != new.Study {
		c.Warnings = append(c.Warnings, fmt.Sprintf("comparing different studies: %q and %q", old.Study, new.Study))
	}
	olds := map[string]*Trial{}
	for i := range old.Trials {
		olds[old.Trials[i].ID] = &old.Trials[i]
	}
	seen := map[string]bool{}
	for i := range new.Trials {
		nt := &new.Trials[i]
		ot, ok := olds[nt.ID]
		if !ok {
			c.OnlyNew = append(c.OnlyNew, nt.ID)
			continue
		}
		seen[nt.ID] = true
		row := compareTrial(ot, nt, threshold)
		if row.Regression {
			c.Regressions = append(c.Regressions, row.ID)
		}
		if row.Improved {
			c.Improvements = append(c.Improvements, row.ID)
		}
		c.Rows = append(c.Rows, row)
	}
	for _, t := range old.Trials {
		if !seen[t.ID] {
			c.OnlyOld = append(c.OnlyOld, t.ID)
		}
	}
	sort.Strings(c.OnlyOld)
	sort.Strings(c.OnlyNew)
	return c
}

func side(s *Summary, path string) Side {
	return Side{Path: path, Study: s.Study, RunID: s.RunID, Kind: s.Kind, Created: s.Created.Format("2006-01-02 15:04 UTC")}
}

func compareTrial(ot, nt *Trial, threshold float64) CompareRow {
	row := CompareRow{ID: nt.ID, Knobs: labelOf(nt), OldOutcome: ot.Outcome, NewOutcome: nt.Outcome}
	switch {
	case ot.OK() && !nt.OK():
		row.Regression = true
		row.Note = fmt.Sprintf("finished before, now %s: %s", nt.Outcome, nt.Error)
		return row
	case !ot.OK() && nt.OK():
		row.Note = fmt.Sprintf("was %s, now finishes", ot.Outcome)
		return row
	case !ot.OK() && !nt.OK():
		row.Note = fmt.Sprintf("did not finish in either run (%s, %s)", ot.Outcome, nt.Outcome)
		return row
	}
	tp := stats.Compare(ot.Samples.Throughput, nt.Samples.Throughput)
	row.Throughput = &tp
	if len(ot.Samples.StepMS) > 0 && len(nt.Samples.StepMS) > 0 {
		st := stats.Compare(ot.Samples.StepMS, nt.Samples.StepMS)
		row.StepTime = &st
	}
	row.Regression = tp.Significant && tp.Pct < -100*threshold
	row.Improved = tp.Significant && tp.Pct > 100*threshold
	if ot.Samples.Source != nt.Samples.Source {
		row.Note = fmt.Sprintf("samples differ in kind (%s vs %s): the test compares unlike variances", ot.Samples.Source, nt.Samples.Source)
	}
	if len(tp.Warnings) > 0 {
		row.Note = strings.TrimPrefix(row.Note+"; "+strings.Join(tp.Warnings, "; "), "; ")
	}
	return row
}
