package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newCompareCommand) }

type compareOptions struct {
	threshold string
	format    string
	json      bool
	output    string

	history      string // --history DIR
	inconclusive string // --inconclusive fail|pass
}

func newCompareCommand() *cobra.Command {
	var opts compareOptions
	cmd := &cobra.Command{
		Use:   "compare [OLD] NEW",
		Short: "Compare two runs trial by trial; a gate that fails closed (exit 1 regression, 4 inconclusive)",
		Long: "compare matches the trials of two runs by their stable IDs. OLD and NEW are run directories or " +
			"baseline files (casestudy baseline). Per trial it compares NEW's launches with OLD's on the study's " +
			"objective: the ratio of geometric means with a 90% Student t interval on log values (pooled variance: " +
			"the same configuration on both sides), and the report's verdict against the threshold (within ±5%, " +
			"faster or slower by more than 5%, faster or slower with more than 5% not shown, undecided).\n\n" +
			"The gate: per trial a one-sided 5% test of \"NEW >= 1/(1+threshold) of OLD\", Holm over the trials " +
			"(--threshold; default the study's compare.threshold, the stricter of OLD's and NEW's, else 5%). REGRESSION when it is rejected, or a " +
			"trial that finished in OLD fails in NEW; PASS when the row's lower bound clears 1/(1+threshold); " +
			"SUSPECTED when the estimate is below it but not confirmed; else UNDECIDED (so is a trial that finished in OLD " +
			"without a clean launch: nothing to judge NEW against). The run is INCONCLUSIVE, not PASS, when a row is " +
			"SUSPECTED or UNDECIDED, when a trial that finished in OLD is not in NEW, or when no row was tested. One launch a side gives no " +
			"interval: give --history DIR with at least 5 earlier comparable runs of the trial for a prediction " +
			"interval (OLD's run and second copies of a run, by run ID, are left out), or the row is SUSPECTED or UNDECIDED. With --history the between-run variance joins the " +
			"standard error at any number of launches. benchstat's median change and Mann-Whitney p are shown alongside.\n\n" +
			"Runs that measured different things (model, preset, GPU model, device, steps, warm-up, objective) " +
			"or share no trial are refused.\n\n" +
			"With NEW alone, OLD is the baseline file NEW's study names under compare.baseline.\n\n" +
			"Exit status: 0 every trial shown no slower than 1/(1+threshold), 1 regression, 4 inconclusive (a " +
			"suspected or undecided trial, a trial missing from NEW, or none tested; --inconclusive=pass makes it 0), 2 usage or input error (including runs " +
			"that cannot be compared), 3 the output cannot be written.",
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
	cmd.Flags().StringVar(&opts.threshold, "threshold", "", "regression threshold, like 5% or 0.05 (default: the study's compare.threshold, the stricter of OLD's and NEW's, else 5%)")
	cmd.Flags().StringVar(&opts.history, "history", "", "a directory of earlier comparable runs (run directories or baseline files); 5 or more holding a trial let one launch a side be judged")
	cmd.Flags().StringVar(&opts.inconclusive, "inconclusive", "fail", "what an inconclusive gate exits with: fail (exit 4) or pass (exit 0)")
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
	if opts.inconclusive != "fail" && opts.inconclusive != "pass" {
		return exitcode.Usage(fmt.Errorf("--inconclusive %q: use fail (exit 4, the default) or pass (exit 0)", opts.inconclusive))
	}
	if err := store.CheckOutputFile("--output (-o)", opts.output); err != nil {
		return err
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
	case cur.CompareThreshold > 0 && old.CompareThreshold > 0:
		// The stricter of the two: a change that loosens its own study's
		// threshold does not loosen the gate that judges it.
		threshold, source = min(cur.CompareThreshold, old.CompareThreshold), "study"
	case cur.CompareThreshold > 0:
		threshold, source = cur.CompareThreshold, "study"
	case old.CompareThreshold > 0:
		threshold, source = old.CompareThreshold, "study"
	default:
		threshold, source = report.DefaultThreshold, "default"
	}
	var history []*report.Summary
	var historyNotes []string
	if opts.history != "" {
		history, historyNotes, err = report.LoadGateHistory(opts.history, cur)
		if err != nil {
			return exitcode.Usage(err)
		}
	}
	c, err := report.CompareWithHistory(old, cur, oldPath, newPath, threshold, history)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("compare %s %s: %w", oldPath, newPath, err))
	}
	c.ThresholdSource = source
	c.History = opts.history
	c.Warnings = append(c.Warnings, historyNotes...)
	report.LinkReports(c, opts.output)
	var buf bytes.Buffer
	if err := report.WriteComparison(&buf, c, opts.format); err != nil {
		return err
	}
	if err := report.WriteFile(opts.output, buf.Bytes(), stdout); err != nil {
		return outputErr(err)
	}
	switch {
	case c.Gate == stats.GateFailed:
		return exitcode.With(exitcode.Failure, fmt.Errorf("%s", c.Verdict))
	case c.Gate == stats.GateInconclusive && opts.inconclusive == "fail":
		return exitcode.With(exitcode.Inconclusive, fmt.Errorf("%s", c.Verdict))
	}
	return nil
}
