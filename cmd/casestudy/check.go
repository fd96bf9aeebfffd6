package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

func init() { register(newCheckCommand) }

type checkOptions struct {
	json         bool
	failOn       string
	study        string
	allowOutside bool
}

func newCheckCommand() *cobra.Command {
	var opts checkOptions
	cmd := &cobra.Command{
		Use:   "check RUN_DIR",
		Short: "Apply the best-practice checklist to a run and print its findings",
		Long: "check reads a run directory (manifest.json, trials.jsonl, logs/) and applies every checklist rule " +
			"(see `casestudy checklist` and docs/checklist.md). Each rule passes, reports a finding with its " +
			"evidence, trials and a recommendation, or says why it does not apply. Threshold overrides and " +
			"disabled rules come from the study's checklist: section (the study file the run recorded, or --study). " +
			"With --fail-on, check exits 1 when a finding of that severity or above exists.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the results as JSON")
	cmd.Flags().StringVar(&opts.failOn, "fail-on", "", "exit 1 when a finding at or above this severity exists: info, warning or error")
	cmd.Flags().StringVar(&opts.study, "study", "", "read the checklist overrides from this study file instead of the run's")
	cmd.Flags().BoolVar(&opts.allowOutside, "allow-outside", false, "let the study's extends reach files outside the studies tree")
	return cmd
}

// checkReport is the --json output of check.
type checkReport struct {
	Run           string             `json:"run"`
	Study         string             `json:"study"`
	OverridesFrom string             `json:"overrides_from"`
	FailOn        string             `json:"fail_on,omitempty"`
	Counts        checklist.Counts   `json:"counts"`
	Results       []checklist.Result `json:"results"`
}

func runCheck(stdout, stderr io.Writer, dir string, opts checkOptions) error {
	var failOn checklist.Severity
	if opts.failOn != "" {
		sev, err := checklist.ParseSeverity(opts.failOn)
		if err != nil {
			return exitcode.Usage(fmt.Errorf("--fail-on: %w", err))
		}
		failOn = sev
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return exitcode.Usage(err)
	}
	if run.Manifest.IsRehearsal() { // its rules read timings a rehearsal does not measure
		return exitcode.Usage(store.RefuseRehearsal(dir, "the checklist's rules"))
	}
	cfg, from, err := studyChecklist(run, opts.study, opts.allowOutside)
	if err != nil {
		return exitcode.Usage(err)
	}
	if err := cfg.Validate(); err != nil {
		return exitcode.Usage(fmt.Errorf("%s: %w", from, err))
	}
	results := checklist.Evaluate(run, cfg)
	if opts.json {
		err = writeJSON(stdout, checkReport{Run: dir, Study: run.Manifest.Study, OverridesFrom: from, FailOn: string(failOn),
			Counts: checklist.Count(results), Results: results})
	} else {
		err = checklist.WriteText(stdout, fmt.Sprintf("checklist of %s (study %s; thresholds from %s)", dir, run.Manifest.Study, from), results)
	}
	if err != nil {
		return err
	}
	if failOn != "" {
		if gated := checklist.Gate(results, failOn); len(gated) > 0 {
			ids := make([]string, len(gated))
			for i, r := range gated {
				ids[i] = r.RuleID
			}
			return exitcode.With(exitcode.Failure, fmt.Errorf("%d finding(s) at or above %s: %v", len(gated), failOn, ids))
		}
	}
	return nil
}

// studyChecklist returns the checklist overrides that apply to the run and
// where they came from: --study when given; else the study file the run
// recorded, when it is still there unchanged (its extends resolve); else the
// study text kept in the manifest; else the defaults.
func studyChecklist(run *store.Run, studyFlag string, allowOutside bool) (checklist.Config, string, error) {
	if studyFlag != "" {
		s, err := study.Load(studyFlag, study.LoadOptions{AllowOutside: allowOutside})
		if err != nil {
			return checklist.Config{}, "", fmt.Errorf("--study: %w", err)
		}
		return configOf(s), studyFlag, nil
	}
	m := run.Manifest
	if m.StudyPath != "" {
		// As given to `casestudy run`: relative to where it ran, which is
		// usually the folder above the output root (results/<study>/<run>).
		candidates := []string{m.StudyPath}
		if !filepath.IsAbs(m.StudyPath) {
			candidates = append(candidates, filepath.Join(run.Dir, "..", "..", "..", m.StudyPath))
		}
		for _, p := range candidates {
			if !isRegular(p) { // not a FIFO or a device the manifest names (audit N8)
				continue
			}
			if s, err := study.Load(p, study.LoadOptions{AllowOutside: allowOutside}); err == nil && s.SHA256 == m.StudySHA256 {
				return configOf(s), p, nil
			}
		}
	}
	if m.StudyText == "" {
		return checklist.Config{}, "the defaults (the manifest records no study)", nil
	}
	tmp, err := os.MkdirTemp("", "casestudy-check-")
	if err != nil {
		return checklist.Config{}, "", err
	}
	defer os.RemoveAll(tmp)
	name := "study.yaml"
	if b := filepath.Base(m.StudyPath); m.StudyPath != "" && filepath.IsLocal(b) {
		name = b
	}
	path, err := writeRecordedSources(tmp, name, &m)
	if err != nil {
		return checklist.Config{}, "", err
	}
	s, err := study.Load(path, study.LoadOptions{Root: tmp})
	if err != nil {
		return checklist.Config{}, "", fmt.Errorf("%s: re-reading the study text recorded in the manifest for its checklist overrides: %w "+
			"(when the study extends a file that is not at hand, pass --study FILE)", filepath.Join(run.Dir, "manifest.json"), err)
	}
	return configOf(s), "the study text in " + filepath.Join(run.Dir, "manifest.json"), nil
}

func configOf(s *study.Study) checklist.Config {
	return checklist.Config{Disable: s.Checklist.Disable, Thresholds: s.Checklist.Thresholds}
}
