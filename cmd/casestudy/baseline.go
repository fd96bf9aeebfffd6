package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"

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
	if err := store.CheckOutputFile("--output (-o)", output); err != nil {
		return err
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	if run.Manifest.IsRehearsal() {
		return exitcode.Usage(store.RefuseRehearsal(dir, "baselines"))
	}
	s := report.Build(run, nil)
	s.Kind = report.KindBaseline
	s.DropLaunchDetail()
	s.Provenance.RunDir = dir
	// count what the gate can use: trials with clean launches (Trial.OK), not
	// outcome ok, which a trial whose every launch was tainted has too; and
	// refuse before writing, so that a committed baseline is never replaced
	// by one that holds nothing or lacks planned trials
	ok := 0
	var unclean, unmeasured []string
	for i := range s.Trials {
		switch t := &s.Trials[i]; {
		case t.OK():
			ok++
		case t.Outcome == store.OK:
			unclean = append(unclean, fmt.Sprintf("%s (%s)", t.Label, t.ID))
		case t.Unmeasured():
			unmeasured = append(unmeasured, fmt.Sprintf("%s (%s, %s)", t.Label, t.ID, t.Outcome))
		}
	}
	if ok == 0 {
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s has no trial that finished with a clean launch: the baseline holds nothing to compare against; "+
			"write it from a run whose trials finished untainted (nothing written)", dir))
	}
	if len(unmeasured) > 0 {
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s did not measure %d planned trial(s): %s; a baseline without them could not show their regressions: "+
			"finish the run (casestudy run --resume %s) and write the baseline from it (nothing written)", dir, len(unmeasured), strings.Join(unmeasured, ", "), dir))
	}
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, s); err != nil {
		return err
	}
	if err := report.WriteFile(output, buf.Bytes(), stdout); err != nil {
		return outputErr(err)
	}
	if output != "-" {
		fmt.Fprintf(stderr, "wrote %s: %d of %d trials with samples\n", output, ok, len(s.Trials))
	}
	if len(unclean) > 0 {
		fmt.Fprintf(stderr, "warning: %d trial(s) finished without a clean launch (every launch tainted or without the metric: %s): "+
			"compare cannot judge NEW against them and is inconclusive while they are in the baseline; write it from a run whose launches are clean\n",
			len(unclean), strings.Join(unclean, ", "))
	}
	if few := fewLaunches(s, minBaselineLaunches); len(few) > 0 {
		fmt.Fprintf(stderr, "warning: %d trial(s) hold fewer than %d launches (%s): compare cannot judge one launch a side "+
			"without --history, and two give its test only 2 degrees of freedom; run the study with repeats: %d or more\n",
			len(few), minBaselineLaunches, strings.Join(few, ", "), minBaselineLaunches)
	}
	return nil
}

// minBaselineLaunches is the fewest launches a baseline trial should hold
// for compare's gate to judge it on its own.
const minBaselineLaunches = 3

// fewLaunches names the finished trials with fewer than n clean launches:
// "micro_batch=32 (1537e079): 1".
func fewLaunches(s *report.Summary, n int) []string {
	var out []string
	for _, t := range s.Trials {
		if t.OK() && t.Value.N < n {
			out = append(out, fmt.Sprintf("%s (%s): %d", t.Label, t.ID, t.Value.N))
		}
	}
	return out
}
