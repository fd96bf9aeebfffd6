package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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
	force        bool
}

func newReportCommand() *cobra.Command {
	var opts reportOptions
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Write report.html, report.md and summary.json for a run",
		Long: "report reads a run directory, applies the checklist (thresholds from the study the run recorded, " +
			"or --study) and writes report.html (one self-contained page with charts), report.md (for pull requests) " +
			"and summary.json into the run directory or --out, with confirm.yaml (a suggested confirmation study) " +
			"when winners were decided. Each trial's number is the geometric mean of its launches with a t interval; " +
			"each trial is compared with the baseline by a Welch interval on log values (docs/reports.md).\n\n" +
			"A run directory that already has reports is not rewritten: write elsewhere with --out, or replace " +
			"them with --force.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "folder to write the reports to (default: the run directory)")
	cmd.Flags().StringVar(&opts.formats, "format", "html,md,json", "formats to write, comma-separated: html, md, json")
	cmd.Flags().StringVar(&opts.study, "study", "", "read the checklist overrides from this study file instead of the run's")
	cmd.Flags().BoolVar(&opts.allowOutside, "allow-outside", false, "let the study's extends reach files outside the studies tree")
	cmd.Flags().BoolVar(&opts.force, "force", false, "replace the reports a run directory already has")
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
	target := dir // the run directory the reports go into, if they do
	if opts.out != "" {
		// Not a file, and not another run's directory (its reports would be
		// replaced by this run's); the run's own directory, or a copy of it,
		// is the run directory again.
		own, err := store.CheckOutputDir("--out", opts.out, run)
		if err != nil {
			return err
		}
		if target = ""; own {
			target = opts.out
		}
	}
	if target != "" && !opts.force {
		if have := existingReports(target, formats); len(have) > 0 {
			return exitcode.Usage(fmt.Errorf("%s already has %s: a finished run's reports are not rewritten silently; "+
				"write new ones elsewhere with --out DIR, or replace them with --force", target, strings.Join(have, ", ")))
		}
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

// existingReports are the report files of formats that dir already holds.
func existingReports(dir string, formats []string) []string {
	var have []string
	for _, f := range formats {
		if name := report.Formats[f]; name != "" {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				have = append(have, name)
			}
		}
	}
	return have
}
