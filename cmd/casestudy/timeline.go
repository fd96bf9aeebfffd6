package main

import (
	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newTimelineCommand) }

func newTimelineCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "timeline RUN_DIR",
		Short: "Show where a run's time went: each phase of its launches, the measured share, when steps settled",
		Long: `timeline adds up the launch timelines of a run directory (trials.jsonl): every phase
from spawning the workers to committing the record, per trial and for the run, the share of
the wall time spent in measured steps, the step at which step times settled against the
warm-up, and for a run with --overlap aa the A/A comparison of launches prepared ahead
(docs/results-format.md, docs/perf.md).`,
		Example: `  casestudy timeline results/gpt/20261202T030405Z-ab12cd`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := store.ReadRun(args[0])
			if err != nil {
				return exitcode.Usage(err)
			}
			t := report.TimelineOf(run)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), t)
			}
			return report.WriteTimelineText(cmd.OutOrStdout(), run.Manifest.Study, t)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}
