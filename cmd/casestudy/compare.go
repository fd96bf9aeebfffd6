package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
)

func init() { register(newCompareCommand) }

type compareOptions struct {
	threshold string
	format    string
	json      bool
	output    string
}

func newCompareCommand() *cobra.Command {
	var opts compareOptions
	cmd := &cobra.Command{
		Use:   "compare [OLD] NEW",
		Short: "Compare two runs trial by trial; exit 1 on a regression",
		Long: "compare matches the trials of two runs by their stable IDs. OLD and NEW are run directories or " +
			"baseline files (casestudy baseline). Per trial it compares NEW's launches with OLD's on the study's " +
			"objective: the ratio of geometric means with a 95% Welch interval on log values, and a verdict " +
			"(faster, slower, no difference larger than the threshold, undecided). A regression is a slower " +
			"verdict that survives Holm's correction over the compared trials with a ratio below " +
			"1/(1+threshold) (--threshold; default the study's compare.threshold, else 5%), or a trial that " +
			"finished in OLD and fails in NEW. benchstat's median change and Mann-Whitney p are shown alongside.\n\n" +
			"Runs that measured different things (model, preset, GPU model, device, steps, warm-up, objective) " +
			"or share no trial are refused.\n\n" +
			"With NEW alone, OLD is the baseline file NEW's study names under compare.baseline.\n\n" +
			"Exit status: 0 no regression, 1 regression, 2 usage or input error (including runs that cannot be " +
			"compared), 3 the output cannot be written.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 { // OLD from the study's compare.baseline
				old, err := report.StudyBaseline(args[0])
				if err != nil {
					return exitcode.Usage(err)
				}
				args = []string{old, args[0]}
			}
			return runCompare(cmd.OutOrStdout(), args[0], args[1], opts, cmd.Flags().Changed("threshold"))
		},
	}
	cmd.Flags().StringVar(&opts.threshold, "threshold", "", "regression threshold, like 5% or 0.05 (default: the study's compare.threshold, else 5%)")
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, md, html or json")
	cmd.Flags().BoolVar(&opts.json, "json", false, "write JSON (the same as --format json)")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func runCompare(stdout io.Writer, oldPath, newPath string, opts compareOptions, thresholdSet bool) error {
	if opts.json {
		if opts.format != "text" && opts.format != "json" {
			return exitcode.Usage(fmt.Errorf("--json and --format %s: give one of them", opts.format))
		}
		opts.format = "json"
	}
	if !slices.Contains(report.CompareFormats, opts.format) {
		return exitcode.Usage(fmt.Errorf("--format %q: use text, md, html or json", opts.format))
	}
	var threshold float64
	if thresholdSet {
		t, err := report.ParseThreshold(opts.threshold)
		if err != nil {
			return exitcode.Usage(fmt.Errorf("--threshold: %w", err))
		}
		threshold = t
	}
	old, err := report.LoadSide(oldPath)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("OLD: %w", err))
	}
	cur, err := report.LoadSide(newPath)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("NEW: %w", err))
	}
	source := "flag"
	switch {
	case thresholdSet:
	case cur.CompareThreshold > 0:
		threshold, source = cur.CompareThreshold, "study"
	case old.CompareThreshold > 0:
		threshold, source = old.CompareThreshold, "study"
	default:
		threshold, source = report.DefaultThreshold, "default"
	}
	c, err := report.Compare(old, cur, oldPath, newPath, threshold)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("compare %s %s: %w", oldPath, newPath, err))
	}
	c.ThresholdSource = source
	report.LinkReports(c, opts.output)
	var buf bytes.Buffer
	if err := report.WriteComparison(&buf, c, opts.format); err != nil {
		return err
	}
	if err := report.WriteFile(opts.output, buf.Bytes(), stdout); err != nil {
		return outputErr(err)
	}
	if len(c.Regressions) > 0 {
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s", c.Verdict))
	}
	return nil
}
