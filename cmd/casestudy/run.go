package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/internal/console"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/provenance/nvmlgpu"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

func init() { register(newRunCommand) }

type runOptions struct {
	out              string
	resume           string
	trials           []string
	retries          int
	interleave       bool
	maxTrials        int
	heartbeatTimeout time.Duration
	killGrace        time.Duration
	noisyCV          float64
	allowOutside     bool
	profile          string // --profile: the profile knob for every trial ("" = the study's)
	overlap          string
	json             bool
	rehearse         bool            // --rehearse (rehearse.go)
	rehearseDistinct bool            // --rehearse-distinct
	rehearseFaults   bool            // --rehearse-faults
	launcher         launcherOptions // launcher.go: --launcher, --submit, --rdzv-addr, ...
	predict          predictFlags    // predict.go: --predict N, --topology, --fit
}

func newRunCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run STUDY | run --resume RUN_DIR",
		Short: "Run every trial of a study and record the results",
		Long: `Run expands the study's sweep and runs each trial in fresh worker processes
(repeats are separate launches), recording one line per trial in
results/<study>/<UTC time>-<id>/trials.jsonl with the provenance in
manifest.json. On a terminal a progress bar shows the launch, elapsed time
and ETA, with each trial's result printed above it; elsewhere one line per
event. The run ends with a summary of every trial and the best one.

Ctrl-C, SIGTERM or SIGHUP stops the trial in flight, records it as
interrupted and prints the command that finishes the run (--resume).

Exit status: 0 when every trial ran (trials that ran out of memory or were
skipped by a constraint included), 1 when a trial failed, crashed or timed
out, 2 bad usage or input, 3 the environment, 128 + the signal's number when
stopped (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).`,
		Example: `  casestudy run studies/gpt/smoke.yaml
  casestudy run studies/bert.yaml --trial 3f2a9c1e
  casestudy run --resume results/gpt-smoke/20260102T030405Z-ab12cd`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd.Context(), cmd, &o, args)
		},
	}
	f := cmd.Flags() // graceful once its run directory exists (gracefulFromNow)
	f.StringVar(&o.out, "out", "results", "root folder of run directories")
	f.StringVar(&o.resume, "resume", "", "finish the run in `RUN_DIR`: run only trials without a committed record")
	markPath(f, "out")
	f.StringArrayVar(&o.trials, "trial", nil, "run only the trial with this `ID` (repeatable; IDs from 'casestudy plan')")
	f.IntVar(&o.retries, "retries", 1, "launch again after an infrastructure failure (rendezvous, process start) this many times")
	f.BoolVar(&o.interleave, "interleave", false, "launch in interleaved rounds (the default; workload.interleave: false turns it off)")
	f.IntVar(&o.maxTrials, "max-trials", 0, fmt.Sprintf("refuse sweeps larger than this (default %d)", study.DefaultMaxTrials))
	durationVar(f, &o.heartbeatTimeout, "heartbeat-timeout", 60*time.Second, 3*time.Second, 24*time.Hour,
		"kill a trial whose rank is silent this long (ranks send a heartbeat every second)")
	durationVar(f, &o.killGrace, "kill-grace", 5*time.Second, 100*time.Millisecond, 10*time.Minute,
		"time between SIGTERM and SIGKILL when a trial is stopped")
	f.Float64Var(&o.noisyCV, "noisy-cv", stats.DefaultNoisyCV, "flag a trial noisy when the CV of its step times or repeat throughputs exceeds this")
	f.BoolVar(&o.allowOutside, "allow-outside", false, "let extends reach files outside the studies tree")
	f.StringVar(&o.profile, "profile", "", "profile `N` more steps after each launch's measured ones (or off): sets the profile knob for every trial")
	f.StringVar(&o.overlap, "overlap", runner.OverlapTail, "start the next launch's processes (spawn, rendezvous, engine library) while the current launch ends: "+
		"tail (once its steps are done), on (as soon as it starts), off, or aa / aa-tail (A/A tests of on and tail; see docs/launch-cost.md)")
	f.BoolVar(&o.rehearse, "rehearse", false, "rehearse the study: every trial with its real ranks and layout as processes sharing the GPUs present (or CPU ranks), host-staged; checks, not measurements (docs/rehearsal.md)")
	f.BoolVar(&o.rehearseFaults, "rehearse-faults", true, "with --rehearse: inject the faults (a rank killed, a rank stalled) once in the first multi-rank trial; false to leave them to another study's rehearsal")
	f.BoolVar(&o.rehearseDistinct, "rehearse-distinct", false, "with --rehearse: rehearse one trial per distinct layout and path (ranks, data parallel x stages, micro-batch, precision, grad_accum, compression, schedule); the others are recorded as covered by it")
	f.BoolVar(&o.json, "json", false, "print the final summary as JSON on standard output (progress goes to standard error)")
	addLauncherFlags(f, &o.launcher)
	addOverrideFlags(f)
	addRunPredictFlags(f, &o.predict)
	return cmd
}

func runRun(ctx context.Context, cmd *cobra.Command, o *runOptions, args []string) error {
	text := cmd.OutOrStdout() // progress and the summary in words
	if o.json {
		text = cmd.ErrOrStderr()
	}
	if o.resume == "" && len(args) == 0 {
		return exitcode.Usage(errors.New("run needs a study file or --resume RUN_DIR (see 'casestudy run --help')"))
	}
	switch {
	case o.retries < 0:
		return exitcode.Usage(fmt.Errorf("--retries %d: give 0 or more", o.retries))
	case o.noisyCV <= 0:
		return exitcode.Usage(fmt.Errorf("--noisy-cv %g: give a positive fraction, like 0.05", o.noisyCV))
	case !slices.Contains(runner.OverlapModes, o.overlap):
		return exitcode.Usage(fmt.Errorf("--overlap %q: give one of %s", o.overlap, strings.Join(runner.OverlapModes, ", ")))
	case o.out == "" && cmd.Flags().Changed("out"): // it would write into the current folder (audit P-6 note)
		return exitcode.Usage(errors.New(`--out "": give the folder for run directories (default results)`))
	case o.maxTrials < 0:
		return exitcode.Usage(fmt.Errorf("--max-trials %d: give 1 or more (0: the default, %d)", o.maxTrials, study.DefaultMaxTrials))
	}
	if err := checkRunFlags(cmd, o); err != nil { // runflags.go
		return err
	}
	if o.resume == "" {
		if err := checkOutFolder(o.out, o.out); err != nil {
			return err
		}
	}

	var w *store.Writer
	var prev *store.Run
	var lock *store.RunLock // --resume: held from here, handed to the writer
	var man *store.Manifest // the run's manifest as written
	studyPath := ""
	if len(args) == 1 {
		studyPath = args[0]
	}
	if o.resume != "" {
		// Lock and read only: nothing in the run directory changes before
		// the study and the machine are checked.
		var err error
		if lock, err = store.LockRun(o.resume); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		defer lock.Close()
		if prev, err = store.ReadRun(o.resume); err != nil {
			return exitcode.Usage(fmt.Errorf("--resume: %w", err))
		}
		man = &prev.Manifest
		if studyPath == "" {
			studyPath = resumeStudyPath(prev)
		}
	}
	s, err := loadStudy(studyPath, o.allowOutside) // as validate and plan: the checklist section too
	if err != nil {
		return err
	}
	if prev == nil { // the study's folder under --out, where the run directory goes
		if err := checkOutFolder(o.out, filepath.Join(o.out, store.SafeName(s.Name))); err != nil {
			return err
		}
	}
	overrides, err := overridesOf(cmd, prev)
	if err != nil {
		return err
	}
	if err := study.ApplyOverrides(s, overrides); err != nil {
		return err
	}
	if err := resolveGPUs(s, o.launcher.submit); err != nil {
		return err
	}
	if cmd.Flags().Changed("profile") {
		v, err := knobs.Canonical("profile", o.profile)
		if err != nil {
			return exitcode.Usage(fmt.Errorf("--profile: %w", err))
		}
		s.Baseline["profile"] = v // not part of trial IDs: --trial and --resume still match
	}
	s.Workload.Rehearse = s.Workload.Rehearse || o.rehearse
	if s.Workload.Rehearse || o.rehearseDistinct || cmd.Flags().Changed("rehearse-faults") {
		if err := rehearsalSetup(cmd, o, s); err != nil {
			return err
		}
	}
	plan, err := study.Expand(s, study.ExpandOptions{MaxTrials: o.maxTrials})
	if o.predict.gpus != 0 {
		plan, err = expandPredicted(s, o.maxTrials, o.predict)
	}
	if err != nil {
		return err
	}
	if prev != nil {
		if err := runner.CheckResume(prev, s); err != nil {
			return err
		}
	}
	if err := checkTrialIDs(plan, o.trials); err != nil {
		return err
	}
	kind := "local" // a rehearsal runs every rank here
	if !s.Workload.Rehearse {
		if kind, err = launch.Kind(o.launcher.kind, o.launcher.submit, s, os.Environ()); err != nil {
			return err
		}
	}
	// The rendezvous address, checked before anything is written (a bad
	// --rdzv-addr left a run directory of not_run trials behind).
	var rv rendezvous
	if !o.launcher.submit { // the job's own run checks it where it runs
		if rv, err = resolveRendezvous(&o.launcher, kind, s); err != nil {
			return err
		}
	}
	if o.launcher.submit {
		if o.resume != "" {
			return exitcode.Usage(errors.New("--submit starts a new run; to finish one, submit a job that runs 'casestudy run --resume RUN_DIR'"))
		}
		return runSubmit(ctx, cmd, o, s, plan)
	}
	gpus := nvmlgpu.Open()
	defer gpus.Close()
	machine, err := runner.Preflight(s, plan, probeEngine, gpus, engineLibFlag(cmd), os.Environ())
	if err != nil {
		return err
	}
	fit := &runner.RehearsalFit{}
	if machine.Rehearse = s.Workload.Rehearse; machine.Rehearse {
		if fit, err = rehearsalFit(s, plan, machine, gpus, o.rehearseDistinct); err != nil {
			return err
		}
	}
	machine.DPWorldOfOne = o.predict.gpus > 0
	if err := predictSetup(s, machine, o.predict); err != nil {
		return err
	}
	if prev != nil {
		if w, err = store.Reopen(prev, lock); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
	} else {
		runID := store.NewRunID(time.Now())
		if o.launcher.runID != "" {
			runID = o.launcher.runID
		}
		man = runner.NewManifest(runID, s, plan, machine, os.Args, os.Environ(), overrides)
		if machine.Rehearse {
			man.Rehearsal = runner.RehearsalFor(machine)
		}
		if w, err = store.Create(o.out, s.Name, runID, man); err != nil {
			return exitcode.With(exitcode.Environment, err)
		}
	}
	defer w.Close()
	gracefulFromNow(ctx)
	exe, err := os.Executable()
	if err != nil {
		return exitcode.With(exitcode.Environment, fmt.Errorf("locating the casestudy binary for the workers: %w", err))
	}

	// The commands this run prints, runnable as printed from any folder.
	studyAbs := absPath(studyPath)
	// A trial runs again with the run's workload overrides (recorded in the
	// manifest, so a resumed run's commands have them too); --resume applies
	// them itself.
	trialCommand := func(id string) string {
		args := append([]string{"run", studyAbs, "--trial", id}, setFlags(cmd, slices.Concat(study.OverrideFlags, []string{"trial", "resume", "run-id", "json"})...)...)
		if o.resume != "" && !cmd.Flags().Changed("out") {
			args = append(args, "--out="+resumedOut(w.Dir))
		}
		return commandLine(append(args, overrideFlagArgs(overrides)...)...)
	}
	resumeCommand := commandLine(append([]string{"run", studyAbs, "--resume", absPath(w.Dir)},
		setFlags(cmd, slices.Concat(study.OverrideFlags, []string{"resume", "out", "run-id"})...)...)...)

	progress := console.NewProgress(text, console.IsTerminal(text))
	ropts := runner.Options{Study: s, Plan: plan, Machine: machine, Writer: w,
		Executable: exe, Env: os.Environ(), Retries: o.retries, Interleave: o.interleave,
		Only: o.trials, HeartbeatLimit: o.heartbeatTimeout, KillGrace: o.killGrace, NoisyCV: o.noisyCV, Overlap: o.overlap,
		Progress: progress, TrialCommand: trialCommand, RehearsalEstimates: fit.Estimates, RehearsalModels: fit.Models, RehearsalUnfit: fit.Unfit, RehearsalNoReference: fit.NoReference, RehearsalNoTwin: fit.NoTwin, RehearsalTwinMicroBatch: fit.TwinMicroBatch, RehearseDistinct: o.rehearseDistinct,
		RehearseNoFaults: !o.rehearseFaults}
	if man.Measurement != nil {
		d := measure.DesignFromRecord(*man.Measurement)
		ropts.Design = &d
	}
	if prev != nil {
		ropts.Previous = runner.Committed(prev)
	}
	if err := setupLauncher(rv, kind, s, os.Environ(), &ropts, w, man, text); err != nil {
		return err
	}
	r, err := runner.New(ropts)
	if err != nil {
		return err
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(text, "note: %s\n", n)
	}
	for _, line := range runner.InheritWarnings(os.Environ(), plan) {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", line)
	}
	fmt.Fprintf(text, "running %s on %s (%d trials planned, %d dropped); results in %s\n",
		s.Name, deviceText(machine), len(plan.Trials), len(plan.Dropped), absPath(w.Dir))
	res, runErr := r.Run(ctx)
	progress.Close()
	fmt.Fprintf(text, "trials: %s\n", res)
	if o.predict.gpus > 0 && runErr == nil {
		if err := predictAfterRun(cmd, text, w.Dir, studyArg(args), o.predict); err != nil {
			fmt.Fprintf(text, "casestudy: no predictions: %v\n", err)
		}
	}
	end := &runEnd{dir: w.Dir, study: s, resume: resumeCommand}
	switch {
	case errors.Is(runErr, runner.ErrInterrupted):
		end.status, end.code = runInterrupted, exitcode.OfStopped(ctx)
	case runErr != nil:
		end.status, end.err = runStopped, runErr
	}
	return endRun(cmd, o, end)
}

func checkTrialIDs(plan *study.Plan, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	known := make([]string, 0, len(plan.Trials))
	for _, t := range plan.Trials {
		known = append(known, t.ID)
	}
	var unknown []string
	for _, id := range ids {
		if !slices.Contains(known, id) {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		hint := fmt.Sprintf("see '%s'", commandLine("plan", absPath(plan.Study.Path)))
		if plan.Strategy == "greedy" {
			hint = "a greedy sweep plans its later rounds from earlier results, so only round 1 trials can run alone; " + hint
		}
		return exitcode.Usage(fmt.Errorf("--trial %s: not a trial of this plan (%s)", strings.Join(unknown, ", "), hint))
	}
	return nil
}

func deviceText(m *runner.Machine) string {
	if m.Device == "cuda" {
		return fmt.Sprintf("cuda (%d GPUs: %s)", len(m.GPUs), strings.Join(m.GPUs, ","))
	}
	return "cpu"
}
