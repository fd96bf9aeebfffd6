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
}

func newHistoryCommand() *cobra.Command {
	var opts historyOptions
	cmd := &cobra.Command{
		Use:   "history DIR",
		Short: "Throughput of each trial over many runs of one study (a slow drift shows)",
		Long: "history reads every run directory under DIR (results/<study>/), oldest first, and shows each trial's " +
			"median throughput per run as a table and, in HTML, as charts (absolute and relative to the first run). " +
			"'last vs first' tests the last run against the first with Mann-Whitney U; ~ = not significant.",
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
	cmd.Flags().BoolVar(&opts.json, "json", false, "write JSON: every run, and per trial its value (the objective) in each run and its drift")
	return cmd
}

func runHistory(stdout io.Writer, dir string, opts historyOptions) error {
	if !opts.json && !slices.Contains(report.HistoryFormats, opts.format) {
		return exitcode.Usage(fmt.Errorf("--format %q: use html, md or text", opts.format))
	}
	h, err := report.LoadHistory(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
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
}

type historyTrialJSON struct {
	ID     string             `json:"id"`
	Knobs  string             `json:"knobs"`           // the knobs that differ from the baseline
	Points []historyPointJSON `json:"points"`          // one per run, in the order of runs
	Drift  *stats.Comparison  `json:"drift,omitempty"` // the last run against the first (Welch over launches)
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
		out.Runs = append(out.Runs, historyRunJSON{Dir: r.Dir, RunID: r.RunID, Created: r.Created})
	}
	for _, t := range h.Trials {
		tj := historyTrialJSON{ID: t.ID, Knobs: t.Knobs, Points: make([]historyPointJSON, len(t.Points)), Drift: t.Drift}
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
