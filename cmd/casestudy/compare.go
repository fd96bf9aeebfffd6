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
	output    string
}

func newCompareCommand() *cobra.Command {
	var opts compareOptions
	cmd := &cobra.Command{
		Use:   "compare OLD NEW",
		Short: "Compare two runs trial by trial; exit 1 on a significant regression",
		Long: "compare matches the trials of two runs by their stable IDs. OLD and NEW are run directories or " +
			"baseline files (casestudy baseline). Per trial it shows the change of throughput and step time with " +
			"a Mann-Whitney U test (golang.org/x/perf/benchmath); ~ marks a change that is not significant at " +
			"alpha 0.05. A regression is a significant throughput drop beyond the threshold (--threshold; default " +
			"the study's compare.threshold, else 5%), or a trial that finished in OLD and fails in NEW.\n\n" +
			"Exit status: 0 no regression, 1 regression, 2 usage or input error, 3 the output cannot be written.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompare(cmd.OutOrStdout(), args[0], args[1], opts, cmd.Flags().Changed("threshold"))
		},
	}
	cmd.Flags().StringVar(&opts.threshold, "threshold", "", "regression threshold, like 5% or 0.05 (default: the study's compare.threshold, else 5%)")
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text, md or html")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func runCompare(stdout io.Writer, oldPath, newPath string, opts compareOptions, thresholdSet bool) error {
	if !slices.Contains(report.CompareFormats, opts.format) {
		return exitcode.Usage(fmt.Errorf("--format %q: use text, md or html", opts.format))
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
	c := report.Compare(old, cur, oldPath, newPath, threshold)
	c.ThresholdSource = source
	var buf bytes.Buffer
	if err := report.WriteComparison(&buf, c, opts.format); err != nil {
		return err
	}
	if err := report.WriteFile(opts.output, buf.Bytes(), stdout); err != nil {
		return outputErr(err)
	}
	if len(c.Regressions) > 0 {
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s", c.Verdict()))
	}
	return nil
}
