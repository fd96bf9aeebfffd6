package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newBaselineCommand) }

func newBaselineCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "baseline RUN_DIR -o FILE",
		Short: "Write a run's summary, with every trial's samples, as a baseline for compare",
		Long: "baseline writes the summary of a run (summary.json schema 1, kind \"baseline\") with each trial's raw " +
			"throughput and step-time samples, so that `casestudy compare FILE NEW_RUN` can still test significance. " +
			"Commit it next to the study, named after it: studies/bert/nccl.baseline.json for studies/bert/nccl.yaml.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBaseline(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "baseline file to write (- for standard output)")
	return cmd
}

func runBaseline(stdout, stderr io.Writer, dir, output string) error {
	if output == "" {
		return exitcode.Usage(fmt.Errorf("--output (-o) is required: the baseline file to write, e.g. studies/bert/nccl.baseline.json next to studies/bert/nccl.yaml (- for standard output)"))
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	s := report.Build(run, nil)
	s.Kind = report.KindBaseline
	s.DropLaunchDetail()
	s.Provenance.RunDir = dir
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, s); err != nil {
		return err
	}
	if err := report.WriteFile(output, buf.Bytes(), stdout); err != nil {
		return outputErr(err)
	}
	ok := s.Counts["ok"]
	if ok == 0 {
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s has no trial that finished: the baseline holds nothing to compare against", dir))
	}
	if output != "-" {
		fmt.Fprintf(stderr, "wrote %s: %d of %d trials with samples\n", output, ok, len(s.Trials))
	}
	return nil
}
