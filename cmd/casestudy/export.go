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

func init() { register(newExportCommand) }

type exportOptions struct {
	format string
	output string
}

func newExportCommand() *cobra.Command {
	var opts exportOptions
	cmd := &cobra.Command{
		Use:   "export RUN_DIR",
		Short: "Export a run as Go benchmark format (for benchstat) or CSV",
		Long: "export writes a run (or a baseline file) as --format benchfmt: the Go benchmark format, one line per " +
			"trial and sample (repeat, or measured step for single-repeat trials) named Train/trial=ID, knobs as " +
			"configuration keys, sec/op and samples/s, so benchstat reads it unchanged " +
			"(benchstat old.txt new.txt); or as --format csv: one row per trial for spreadsheets.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "benchfmt", "benchfmt or csv")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func runExport(stdout, stderr io.Writer, path string, opts exportOptions) error {
	if opts.format != "benchfmt" && opts.format != "csv" {
		return exitcode.Usage(fmt.Errorf("--format %q: use benchfmt or csv", opts.format))
	}
	if err := store.CheckOutputFile("--output (-o)", opts.output); err != nil {
		return err
	}
	s, err := report.LoadSide(path)
	if err != nil {
		return exitcode.Usage(err)
	}
	var buf bytes.Buffer
	if opts.format == "csv" {
		// A row per trial, finished or not (its outcome and error): a
		// legitimate export even when none finished; said on stderr.
		if err = report.WriteCSV(&buf, s); err == nil {
			if n := finishedTrials(s); n < len(s.Trials) {
				fmt.Fprintf(stderr, "%d of %d trials did not finish: their rows hold the outcome and error, no measurement\n", len(s.Trials)-n, len(s.Trials))
			} else if len(s.Trials) == 0 {
				fmt.Fprintf(stderr, "%s holds no trial: the CSV has its header only\n", path)
			}
		}
	} else {
		var n int
		n, err = report.WriteBenchfmt(&buf, s)
		if err == nil && n == 0 {
			// Nothing for benchstat to read: an empty export would pass for
			// a measurement of nothing, so it is refused, as baseline
			// refuses a baseline that holds nothing.
			return exitcode.With(exitcode.Failure, fmt.Errorf("%s has no finished trial (%d planned): the export would hold no benchmark line; "+
				"finish the run (casestudy run --resume %s) or export another (nothing written)", path, len(s.Trials), path))
		}
		if err == nil && n < len(s.Trials) {
			fmt.Fprintf(stderr, "%d of %d trials did not finish and have no benchmark lines\n", len(s.Trials)-n, len(s.Trials))
		}
	}
	if err != nil {
		return err
	}
	return outputErr(report.WriteFile(opts.output, buf.Bytes(), stdout))
}

// finishedTrials counts the trials of s that finished with a measurement.
func finishedTrials(s *report.Summary) int {
	n := 0
	for i := range s.Trials {
		if s.Trials[i].OK() {
			n++
		}
	}
	return n
}
