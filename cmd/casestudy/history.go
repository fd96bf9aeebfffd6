package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newHistoryCommand) }

type historyOptions struct {
	format string
	output string
	json   bool
	last   int
}

func newHistoryCommand() *cobra.Command {
	var opts historyOptions
	cmd := &cobra.Command{
		Use:   "history DIR",
		Short: "The objective of each trial over many runs of one study: drift and change points",
		Long: "history reads every run directory under DIR (results/<study>/), oldest first (--last N: the newest N), " +
			"and shows each trial's value per run (the study's objective, the geometric mean over the run's launches) " +
			"as a table and, in HTML, as charts (absolute and relative to the first run) with links to each run's report. " +
			"Runs that compare would refuse against the latest one (another model or preset, device, step count, GPU model, " +
			"objective, or GPU, node, rank or thread count) and copies of a run (the same run ID) are left out with a warning.\n\n" +
			"'last vs first' compares the last run where the trial finished with the first: the ratio with compare's 90% " +
			"Student t interval over launches (pooled variance) and its verdict. 'change point' is E-Divisive means over the " +
			"trial's values (6 or more finished runs), a permutation test at 5% over all the trials tested (Bonferroni); it names " +
			"the first run after the change and the ratio after over before (better > 1). A change needs 3 runs or more after " +
			"it (more with many trials: the method line says how many), so one in the last runs cannot be flagged yet; " +
			"'cannot detect (N runs, K trials)' says that N runs are too few for any change to reach the level of K trials.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.json && cmd.Flags().Changed("format") {
				return exitcode.Usage(errors.New("--json and --format: give one of them"))
			}
			return runHistory(cmd.OutOrStdout(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: html, md or text")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().BoolVar(&opts.json, "json", false, "write JSON: every run, and per trial its value (the objective) in each run, its drift and change points")
	cmd.Flags().IntVar(&opts.last, "last", 0, "only the newest N runs (0: all)")
	return cmd
}

func runHistory(stdout io.Writer, dir string, opts historyOptions) error {
	if !opts.json && !slices.Contains(report.HistoryFormats, opts.format) {
		return exitcode.Usage(fmt.Errorf("--format %q: use html, md or text", opts.format))
	}
	if opts.last < 0 {
		return exitcode.Usage(fmt.Errorf("--last %d: give a number of runs, 1 or more (0: all)", opts.last))
	}
	if err := store.CheckOutputFile("--output (-o)", opts.output); err != nil {
		return err
	}
	h, err := report.LoadHistory(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	h.Last(opts.last)
	report.LinkRuns(h, opts.output)
	var buf bytes.Buffer
	if opts.json {
		err = writeJSON(&buf, historyOf(h))
	} else {
		err = report.WriteHistory(&buf, h, opts.format)
	}
	if err != nil {
		return err
	}
	return outputErr(report.WriteFile(opts.output, buf.Bytes(), stdout))
}

// historyJSON is `casestudy history --json`.
type historyJSON struct {
	Dir      string             `json:"dir"`
	Study    string             `json:"study"`
	Metric   stats.Metric       `json:"metric"` // the objective every value is in (the latest run's)
	Runs     []historyRunJSON   `json:"runs"`   // oldest first
	Trials   []historyTrialJSON `json:"trials"`
	Warnings []string           `json:"warnings,omitempty"`
}

type historyRunJSON struct {
	Dir     string    `json:"dir"`
	RunID   string    `json:"run_id"`
	Created time.Time `json:"created"`
	Report  string    `json:"report,omitempty"` // its report.html, relative to the output's folder
}

type historyTrialJSON struct {
	ID     string             `json:"id"`
	Knobs  string             `json:"knobs"`           // the knobs that differ from the baseline
	Points []historyPointJSON `json:"points"`          // one per run, in the order of runs
	Drift  *stats.Comparison  `json:"drift,omitempty"` // the last run against the first (90% Student t over launches, pooled, as compare)
	// Changes are the change points (index: the first run after the change).
	Changes []stats.ChangePoint `json:"change_points"`
}

// historyPointJSON is a trial in one run: no outcome when the run did not
// have it, its value (in the metric's unit) when it finished.
type historyPointJSON struct {
	Outcome store.Outcome `json:"outcome,omitempty"`
	Value   *stats.Value  `json:"value,omitempty"`
}

func historyOf(h *report.History) historyJSON {
	out := historyJSON{Dir: h.Dir, Study: h.Study, Metric: h.Metric, Runs: []historyRunJSON{}, Trials: []historyTrialJSON{}, Warnings: h.Warnings}
	for _, r := range h.Runs {
		out.Runs = append(out.Runs, historyRunJSON{Dir: r.Dir, RunID: r.RunID, Created: r.Created, Report: r.Report})
	}
	for _, t := range h.Trials {
		tj := historyTrialJSON{ID: t.ID, Knobs: t.Knobs, Points: make([]historyPointJSON, len(t.Points)), Drift: t.Drift, Changes: t.Changes}
		if tj.Changes == nil {
			tj.Changes = []stats.ChangePoint{}
		}
		for i, p := range t.Points {
			tj.Points[i].Outcome = p.Outcome
			if p.Value.N > 0 {
				v := p.Value
				tj.Points[i].Value = &v
			}
		}
		out.Trials = append(out.Trials, tj)
	}
	return out
}
