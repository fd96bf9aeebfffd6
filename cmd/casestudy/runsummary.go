package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
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
		Status: end.status, Metric: b.Metric, Outcomes: map[string]int{}, Trials: []runTrial{}}
	if end.status != runComplete {
		sum.Resume = end.resume
	}
	for _, t := range b.Trials {
		if t.Outcome == store.Skipped {
			sum.Dropped++
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
	if b.Headline.Status != "" {
		h := b.Headline
		sum.Headline = &h
	}
	return sum
}

// printRunSummary is the table at the end of a run: every trial with its
// outcome, its value in the objective's unit with its interval, its verdict
// against the baseline (stats.Comparison.Text: "1.24× [1.13, 1.38] faster")
// and its step time; then the report's headline, the winner in one line.
//
// HOOK(stats): the statistics own what these cells say (report.Trial's
// Value and VsBaseline, report.Headline); a dedicated end-of-run summary
// from them replaces this table's rows and the last line here.
func printRunSummary(w io.Writer, sum *runSummary) error {
	if len(sum.Trials) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TRIAL\tCHANGED\tOUTCOME\t%s\tINTERVAL\tVS BASELINE\tSTEP MS\t\n", strings.ToUpper(cmpOr(sum.Metric.Unit, "value")))
	for _, t := range sum.Trials {
		changed := "baseline"
		if len(t.Changed) > 0 {
			changed = study.FormatKnobs(t.Changed, slices.Sorted(maps.Keys(t.Changed)))
		}
		value, interval, vs, step := "-", "", "", "-"
		if t.Value != nil {
			value, interval, step = report.Num(t.Value.Center), report.Interval(*t.Value), report.Num(t.StepMS)
		}
		if t.VsBaseline != nil {
			vs = t.VsBaseline.Text()
		}
		outcome := string(t.Outcome)
		if t.Best {
			outcome += " (best)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", t.ID, changed, outcome, value, interval, vs, step)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if sum.Dropped > 0 {
		fmt.Fprintf(w, "(%d combinations dropped by the planner; see the report)\n", sum.Dropped)
	}
	if sum.Status == runComplete && sum.Headline != nil && sum.Headline.Text != "" {
		fmt.Fprintf(w, "\n%s\n", sum.Headline.Text)
	}
	return nil
}
