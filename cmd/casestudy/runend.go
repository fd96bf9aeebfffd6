package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// How a run ended (runSummary.Status).
const (
	runComplete    = "complete"    // every planned trial has a record
	runInterrupted = "interrupted" // a signal stopped it; resumable
	runStopped     = "stopped"     // an error stopped it (a record could not be committed); resumable
)

// runEnd is what runRun hands to endRun.
type runEnd struct {
	dir    string
	study  *study.Study
	resume string // the command that finishes the run
	status string // "" = complete
	code   int    // the exit status of an interrupted run
	err    error  // what stopped the run
}

// endRun finishes the output of a run: on completion the reports and the
// checklist command, then the summary of every trial (text, or JSON with
// --json) and the exit status: 1 when a trial failed, crashed or timed out.
func endRun(cmd *cobra.Command, o *runOptions, end *runEnd) error {
	text := cmd.OutOrStdout()
	if o.json {
		text = cmd.ErrOrStderr()
	}
	if end.status == "" {
		end.status = runComplete
	}
	var reports []string
	var reportErr error
	run, err := store.ReadRun(end.dir)
	if err != nil {
		return fmt.Errorf("reading back %s: %w\nresume with: %s", end.dir, err, end.resume)
	}
	if end.status == runComplete {
		studyArgs := []string{"--study", absPath(end.study.Path)}
		if o.allowOutside {
			studyArgs = append(studyArgs, "--allow-outside")
		}
		reports, reportErr = writeRunReports(text, run, end.study, studyArgs)
	}
	sum := summarizeRun(run, end)
	switch {
	case end.status == runInterrupted:
		sum.ExitCode = end.code
	case end.status == runStopped:
		sum.ExitCode, sum.Error = exitcode.Of(end.err), end.err.Error()
	case reportErr != nil:
		sum.ExitCode, sum.Error = exitcode.Of(reportErr), reportErr.Error()
	case len(sum.Failed) > 0:
		sum.ExitCode = exitcode.Failure
	}
	sum.Reports = reports
	if o.json {
		if err := writeJSON(cmd.OutOrStdout(), sum); err != nil {
			return err
		}
	} else if err := printRunSummary(text, sum); err != nil {
		return err
	}
	switch {
	case end.status == runInterrupted:
		fmt.Fprintf(text, "interrupted; what finished is in %s\nresume with: %s\n", absPath(end.dir), end.resume)
	case end.status == runStopped:
		fmt.Fprintf(cmd.ErrOrStderr(), "casestudy: %v\nresume with: %s\n", end.err, end.resume)
	case reportErr != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "casestudy: %v\n", reportErr)
	case len(sum.Failed) > 0:
		fmt.Fprintf(text, "%d trial(s) failed, crashed or timed out: %s (exit status 1)\n",
			len(sum.Failed), strings.Join(sum.Failed, ", "))
	}
	if sum.ExitCode != 0 {
		return exitcode.Silent{Code: sum.ExitCode}
	}
	return nil
}

// writeRunReports applies the checklist with the study's thresholds (the
// study is already loaded, --allow-outside included), writes the study's
// report formats into the run directory and says where everything is.
// studyArgs name the study for the report and check commands it prints.
func writeRunReports(out io.Writer, run *store.Run, s *study.Study, studyArgs []string) ([]string, error) {
	fmt.Fprintf(out, "results: %s\n", run.Dir)
	fmt.Fprintf(out, "  trials:   %s\n", filepath.Join(run.Dir, "trials.jsonl"))
	fmt.Fprintf(out, "  manifest: %s\n", filepath.Join(run.Dir, "manifest.json"))
	fmt.Fprintf(out, "  logs:     %s\n", filepath.Join(run.Dir, "logs"))
	formats := s.Report.Formats
	if len(formats) == 0 {
		formats = report.DefaultFormats
	}
	fmt.Fprintln(out, "reports:")
	var paths strings.Builder
	if err := writeReports(&paths, run, configOf(s), s.Path, "", formats); err != nil {
		return nil, fmt.Errorf("writing the reports of %s: %w (the results are intact; retry with '%s')",
			run.Dir, err, commandLine(append([]string{"report", absPath(run.Dir), "--force"}, studyArgs...)...))
	}
	fmt.Fprint(out, paths.String())
	if !run.Manifest.IsRehearsal() { // the checklist reads measurements
		fmt.Fprintf(out, "checklist: %s\n", commandLine(append([]string{"check", absPath(run.Dir)}, studyArgs...)...))
		if b := run.Manifest.CompareBaseline; b != "" { // run measures; the gate against the study's baseline is compare's
			fmt.Fprintf(out, "gate:      %s (against %s)\n", commandLine("compare", absPath(run.Dir)), b)
		}
	}
	return strings.Fields(paths.String()), nil
}

// failedOutcomes make `casestudy run` exit 1: the trial did not measure what
// it was planned to, for a reason other than the configuration's own limit
// (oom) or a constraint (skipped, unsupported).
var failedOutcomes = map[store.Outcome]bool{store.Failed: true, store.Crashed: true, store.Timeout: true}
