package main

import (
	"fmt"
	"io"

	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// runSummary is the end of `casestudy run`: printed as a table, or as JSON
// with --json (docs/results-format.md, "casestudy run --json"). The numbers
// are the report's (report.Build), so the terminal, report.md and
// summary.json agree.
type runSummary struct {
	RunDir    string           `json:"run_dir"`
	Study     string           `json:"study"`
	StudyPath string           `json:"study_path"`
	Status    string           `json:"status"`    // complete, interrupted or stopped
	ExitCode  int              `json:"exit_code"` // the status casestudy exits with
	Error     string           `json:"error,omitempty"`
	Metric    stats.Metric     `json:"metric"`           // the objective every trial's value is in
	Outcomes  map[string]int   `json:"outcomes"`         // every trial of the run directory, by outcome
	Failed    []string         `json:"failed,omitempty"` // trials that failed, crashed or timed out (exit status 1)
	Headline  *report.Headline `json:"headline,omitempty"`
	Trials    []runTrial       `json:"trials"`
	Dropped   int              `json:"dropped"`           // combinations the planner dropped (not trials)
	Reports   []string         `json:"reports,omitempty"` // files written (a complete run)
	Resume    string           `json:"resume_command,omitempty"`

	report *report.Summary // what the table prints (report.WriteTrialLines, WinnerLine)
}

// runTrial is one trial of the summary.
type runTrial struct {
	ID         string            `json:"id"`
	Changed    map[string]string `json:"changed"` // knobs that differ from the baseline
	Outcome    store.Outcome     `json:"outcome"`
	Value      *stats.Value      `json:"value,omitempty"`       // the objective: geometric mean over the clean launches, with its interval
	VsBaseline *stats.Comparison `json:"vs_baseline,omitempty"` // against the baseline: ratio, interval, verdict
	Throughput *stats.Value      `json:"throughput,omitempty"`  // samples/s, the same estimator
	StepMS     float64           `json:"step_ms,omitempty"`     // median step time
	Best       bool              `json:"best,omitempty"`
	Baseline   bool              `json:"baseline,omitempty"`
	Error      string            `json:"error,omitempty"`
	Command    string            `json:"command"` // re-runs this trial alone
}

// summarizeRun builds the summary of the run directory as it is now.
func summarizeRun(run *store.Run, end *runEnd) *runSummary {
	b := report.Build(run, nil)
	sum := &runSummary{RunDir: absPath(run.Dir), Study: run.Manifest.Study, StudyPath: absPath(end.study.Path),
		Status: end.status, Metric: b.Metric, Outcomes: map[string]int{}, Trials: []runTrial{}, report: b}
	if end.status != runComplete {
		sum.Resume = end.resume
	}
	for _, t := range b.Trials {
		if t.Outcome == store.Skipped { // not a trial: dropped (report.Build lists them apart)
			continue
		}
		sum.Outcomes[string(t.Outcome)]++
		if failedOutcomes[t.Outcome] {
			sum.Failed = append(sum.Failed, t.ID)
		}
		rt := runTrial{ID: t.ID, Changed: map[string]string{}, Outcome: t.Outcome, Best: t.Best, Baseline: t.Baseline,
			VsBaseline: t.VsBaseline, Error: t.Error, Command: t.Command}
		for _, k := range t.Changed {
			rt.Changed[k] = t.Knobs[k]
		}
		if t.OK() {
			v, tp := t.Value, t.Throughput
			rt.Value, rt.Throughput, rt.StepMS = &v, &tp, t.StepMS.Median
		}
		sum.Trials = append(sum.Trials, rt)
	}
	sum.Dropped = len(b.Dropped)
	if b.Headline.Status != "" {
		h := b.Headline
		sum.Headline = &h
	}
	return sum
}

// printRunSummary is the table at the end of a run, the statistics' own
// (report.WriteTrialLines): every trial with its value in the objective's
// unit, its launches, its comparison with the baseline and the verdict in
// words; then, for a complete run, the winner in one line
// (report.WinnerLine, corrected for picking the best).
func printRunSummary(w io.Writer, sum *runSummary) error {
	if len(sum.Trials) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	if sum.report.Kind == report.KindRehearsal { // checks, not measurements: no values, no winner
		return report.WriteRehearsalLines(w, sum.report)
	}
	if err := report.WriteTrialLines(w, sum.report); err != nil {
		return err
	}
	if sum.Dropped > 0 {
		fmt.Fprintf(w, "(%d combinations dropped by the planner; see the report)\n", sum.Dropped)
	}
	if sum.Status == runComplete {
		fmt.Fprintln(w, report.WinnerLine(sum.report))
	}
	return nil
}
