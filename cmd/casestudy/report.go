package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newReportCommand) }

type reportOptions struct {
	out          string
	formats      string
	study        string
	allowOutside bool
}

func newReportCommand() *cobra.Command {
	var opts reportOptions
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Write report.html, report.md and summary.json for a run",
		Long: "report reads a run directory, applies the checklist (thresholds from the study the run recorded, " +
			"or --study) and writes report.html (one self-contained page with charts), report.md (for pull requests) " +
			"and summary.json (schema 1) into the run directory or --out. Medians come with distribution-free 95% " +
			"confidence intervals (golang.org/x/perf/benchmath); see docs/reports.md.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "folder to write the reports to (default: the run directory)")
	cmd.Flags().StringVar(&opts.formats, "format", "html,md,json", "formats to write, comma-separated: html, md, json")
	cmd.Flags().StringVar(&opts.study, "study", "", "read the checklist overrides from this study file instead of the run's")
	cmd.Flags().BoolVar(&opts.allowOutside, "allow-outside", false, "let the study's extends reach files outside the studies tree")
	return cmd
}

func runReport(stdout, stderr io.Writer, dir string, opts reportOptions) error {
	formats, err := report.ParseFormats(opts.formats)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("--format: %w", err))
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	cfg, from, err := studyChecklist(run, opts.study, opts.allowOutside)
	if err != nil {
		if opts.study != "" {
			return exitcode.Usage(err)
		}
		// The report matters more than the study's threshold overrides.
		fmt.Fprintf(stderr, "casestudy: note: checklist with default thresholds: %v\n", err)
		cfg, from = checklist.Config{}, "the defaults"
	}
	return writeReports(stdout, run, cfg, from, opts.out, formats)
}

// writeReports applies the checklist with cfg (from says where cfg came from,
// for errors) and writes the reports of run into out (default: the run directory).
func writeReports(stdout io.Writer, run *store.Run, cfg checklist.Config, from, out string, formats []string) error {
	if err := cfg.Validate(); err != nil {
		return exitcode.Usage(fmt.Errorf("%s: %w", from, err))
	}
	paths, err := report.Write(run, checklist.Evaluate(run, cfg), out, formats)
	if err != nil {
		return outputErr(err)
	}
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return nil
}
