package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
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
	Throughput *stats.Estimate   `json:"throughput,omitempty"` // samples/s, median of the launches with its interval
	StepMS     float64           `json:"step_ms,omitempty"`    // median step time
	Best       bool              `json:"best,omitempty"`
	Baseline   bool              `json:"baseline,omitempty"`
	Error      string            `json:"error,omitempty"`
	Command    string            `json:"command"` // re-runs this trial alone
}

// summarizeRun builds the summary of the run directory as it is now.
func summarizeRun(run *store.Run, end *runEnd) *runSummary {
	b := report.Build(run, nil)
	sum := &runSummary{RunDir: absPath(run.Dir), Study: run.Manifest.Study, StudyPath: absPath(end.study.Path),
		Status: end.status, Outcomes: map[string]int{}, Trials: []runTrial{}}
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
			Error: t.Error, Command: t.Command}
		for _, k := range t.Changed {
			rt.Changed[k] = t.Knobs[k]
		}
		if t.OK() {
			tp := t.Throughput
			rt.Throughput, rt.StepMS = &tp, t.StepMS.Median
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
// outcome and throughput, then the headline.
//
// HOOK(stats): the verdict of each trial against the baseline and the winner
// line ("micro_batch=32: 1.24× [1.13, 1.38] faster") come from the
// statistics' end-of-run summary; until it lands, the report's headline.
func printRunSummary(w io.Writer, sum *runSummary) error {
	if len(sum.Trials) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tCHANGED\tOUTCOME\tSAMPLES/S\tINTERVAL\tSTEP MS\t")
	for _, t := range sum.Trials {
		changed := "baseline"
		if len(t.Changed) > 0 {
			changed = study.FormatKnobs(t.Changed, slices.Sorted(maps.Keys(t.Changed)))
		}
		value, interval, step := "-", "", "-"
		if t.Throughput != nil {
			value, interval, step = report.Num(t.Throughput.Center), report.Interval(*t.Throughput), report.Num(t.StepMS)
		}
		outcome := string(t.Outcome)
		if t.Best {
			outcome += " (best)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", t.ID, changed, outcome, value, interval, step)
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
