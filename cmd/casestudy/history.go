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

func init() { register(newHistoryCommand) }

type historyOptions struct {
	format string
	output string
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
			return runHistory(cmd.OutOrStdout(), args[0], opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: html, md or text")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

func runHistory(stdout io.Writer, dir string, opts historyOptions) error {
	if !slices.Contains(report.HistoryFormats, opts.format) {
		return exitcode.Usage(fmt.Errorf("--format %q: use html, md or text", opts.format))
	}
	h, err := report.LoadHistory(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	var buf bytes.Buffer
	if err := report.WriteHistory(&buf, h, opts.format); err != nil {
		return err
	}
	return outputErr(report.WriteFile(opts.output, buf.Bytes(), stdout))
}
