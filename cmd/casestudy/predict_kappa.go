package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/predict/runs"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// The κ calibration (docs/predict.md): `run --predict N --kappa auto` runs
// the baseline trial once more with a load beside each backward pass
// (CASESTUDY_INTERFERE, engine/native/src/interfere.h) into RUN_DIR/kappa,
// and κ is its backward time over the one without the load.

// envInterfere is the engine's switch for the calibration's load.
const envInterfere = "CASESTUDY_INTERFERE"

// kappaDir is where `run --predict --kappa auto` puts its calibration launch.
const kappaDir = "kappa"

var interfereSpec = regexp.MustCompile(`^([1-9][0-9]*(:[0-9]+(\.[0-9]+)?)?|gloo)$`)

// readCalibration sets --kappa auto's κ from the calibration runs: the
// memory-streaming load's one κ (runs.Kappa), or with stretch calibration
// runs (run --interfere gloo) each trial's own (runs.Stretches). Not both.
func (o *predictFlags) readCalibration(clean, loaded []*store.Run) error {
	shadow := 0
	for _, r := range loaded {
		if runs.ShadowRanks(r) > 0 {
			shadow++
		}
	}
	switch {
	case shadow == 0:
		cal, err := runs.Kappa(clean, loaded)
		if err != nil {
			return exitcode.Usage(fmt.Errorf("--kappa auto: %w", err))
		}
		o.kappa, o.calibration = cal.Kappa, &cal
	case shadow < len(loaded):
		return exitcode.Usage(errors.New("--kappa auto: give stretch calibration runs (--interfere gloo) or memory-load ones, not both"))
	default:
		// A trial's stretch calibration measured its backward beside its own
		// collectives: --fit-stretch's model of the same effect would stretch
		// it twice.
		if o.fitStretch != "" {
			return exitcode.Usage(errors.New("--kappa auto with stretch calibration runs already stretches each trial's backward: drop --fit-stretch"))
		}
		st, err := runs.Stretches(loaded, o.gpus)
		if err != nil {
			return exitcode.Usage(fmt.Errorf("--kappa auto: %w", err))
		}
		o.stretches = st
	}
	return nil
}

// parseKappa reads --kappa: a factor of at least 1, or auto.
func (o *predictFlags) parseKappa() error {
	o.auto = o.kappaArg == "auto"
	if o.auto {
		o.kappa = 1
		return nil
	}
	if o.kappaArg == "" {
		o.kappaArg = "1"
	}
	v, err := strconv.ParseFloat(o.kappaArg, 64)
	if err != nil || !(v >= 1) {
		return exitcode.Usage(fmt.Errorf("--kappa %s: give a slowdown factor of 1 or more, or auto (measured)", o.kappaArg))
	}
	o.kappa = v
	return nil
}

// addRunInterfereFlag adds `run --interfere C:B`: the calibration launch's load.
func addRunInterfereFlag(f *pflag.FlagSet, o *predictFlags) {
	f.StringVar(&o.load, "interfere", "", "with --predict: run a load beside every backward pass, as a concurrent collective "+
		"would (C:B: C multiprocessors of a GPU or C threads of CPU ranks streaming B GB/s; 0: unpaced): a κ calibration "+
		"launch, which --kappa auto runs for you; gloo (CPU ranks): every other step, the trial's own buckets as Gloo "+
		"all-reduces on a group of N ranks whose others only communicate, each trial's stretch calibration (docs/predict.md)")
}

// predictSetup prepares a `run --predict` before its runner starts: the
// threads of CPU ranks (predictThreads) and, for a calibration launch, the
// load every rank starts with (the runner passes this environment on).
func predictSetup(s *study.Study, m *runner.Machine, o predictFlags) error {
	if o.load != "" {
		if o.gpus == 0 {
			return exitcode.Usage(errors.New("--interfere goes with --predict N (a κ calibration launch)"))
		}
		if !interfereSpec.MatchString(o.load) {
			return exitcode.Usage(fmt.Errorf("--interfere %q: give C or C:B (C blocks or threads, 1 or more; B GB/s), or gloo", o.load))
		}
		env := o.load
		if env == "gloo" { // the stretch calibration: the buckets on a Gloo group of N (shadow_gloo.cpp)
			if s.Workload.Device == "cuda" {
				return exitcode.Usage(fmt.Errorf("--interfere gloo: CPU ranks only (workload.device is %q)", s.Workload.Device))
			}
			env = fmt.Sprintf("gloo:%d", o.gpus)
		}
		if err := os.Setenv(envInterfere, env); err != nil {
			return err
		}
	}
	predictThreads(s, m, o)
	return nil
}

// defaultLoad is the calibration's load when --interfere is not given: what
// the predicted collective would do beside the backward pass: on NCCL's
// model, one block per ring channel of the topology; on CPU ranks (a fit),
// Gloo's one thread; streaming twice the cost model's bus bandwidth at the
// run's largest bucket (each byte sent is read, each byte received written).
func defaultLoad(o predictFlags, bucket int64) (string, error) {
	cost, _, err := o.costModel(o.gpus)
	if err != nil {
		return "", err
	}
	blocks := 1
	if n, ok := cost.(predict.NCCL); ok && n.Topo.Ring.Channels > 0 {
		blocks = n.Topo.Ring.Channels
	}
	ms, _, err := cost.Time(predict.AllReduce, bucket, o.gpus)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d:%.1f", blocks, 2*predict.BusBW(predict.AllReduce, bucket, o.gpus, ms)), nil
}

// calibrate runs the κ calibration launch of a finished `run --predict`: its
// baseline trial (else its first ok trial), one launch, with the load, as a
// run of its own in RUN_DIR/kappa, started with this command's own flags.
func calibrate(cmd *cobra.Command, w io.Writer, dir, studyPath string, o predictFlags) (string, error) {
	if studyPath == "" {
		return "", errors.New("--kappa auto: a resumed run has no study path here; run casestudy predict RUN_DIR --kappa auto with a calibration run")
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return "", err
	}
	var trial *store.TrialRecord
	for i := range run.Trials {
		t := &run.Trials[i]
		if t.Outcome == store.OK && (trial == nil || len(t.Changed) == 0 && len(trial.Changed) > 0) {
			trial = t
		}
	}
	if trial == nil {
		return "", errors.New("--kappa auto: no trial finished to calibrate on")
	}
	load := o.load
	// CPU ranks: the stretch calibration of every trial (its own backward
	// beside its own buckets on a Gloo group of N), not the memory load.
	cpu := load == "" && run.Manifest.Workload["device_resolved"] == "cpu"
	if cpu {
		load = "gloo"
	}
	if load == "" {
		var largest int64
		for _, rp := range trial.Repeats {
			for _, r := range rp.Ranks {
				for _, s := range r.Steps {
					for _, b := range s.Buckets {
						largest = max(largest, b.Bytes)
					}
				}
			}
		}
		if load, err = defaultLoad(o, max(largest, 1<<20)); err != nil {
			return "", err
		}
	}
	args := []string{"run", studyPath}
	skip := map[string]bool{"trial": true, "repeats": true, "out": true, "run-id": true, "kappa": true, "interfere": true,
		"resume": true, "json": true, "profile": true}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if skip[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	out := filepath.Join(dir, kappaDir)
	if cpu {
		args = append(args, "--repeats", "1", "--out", out, "--run-id", kappaDir, "--interfere", load)
		fmt.Fprintf(w, "stretch calibration: every trial once more, its buckets every other step on a Gloo group of %d beside its backward, in %s\n", o.gpus, out)
	} else {
		args = append(args, "--trial", trial.ID, "--repeats", "1", "--out", out, "--run-id", kappaDir, "--interfere", load)
		fmt.Fprintf(w, "κ calibration: trial %s once more with a load of %s (C:GB/s) beside each backward pass, in %s\n", trial.ID, load, out)
	}
	code := execute(cmd.Context(), args, w, cmd.ErrOrStderr())
	if prev, ok := os.LookupEnv(envInterfere); ok && (prev == load || cpu && strings.HasPrefix(prev, "gloo:")) {
		os.Unsetenv(envInterfere)
	}
	if code != 0 {
		return "", fmt.Errorf("the κ calibration launch failed (exit status %d)", code)
	}
	return filepath.Join(out, filepath.Base(filepath.Dir(dir)), kappaDir), nil
}

// readPredictRuns reads predict's RUN_DIRs: the one-rank runs, and with
// --kappa auto the calibration runs among them or in their kappa folder.
func readPredictRuns(dirs []string, auto bool) (clean, loaded []*store.Run, err error) {
	for _, dir := range dirs {
		run, err := store.ReadRun(dir)
		if err != nil {
			return nil, nil, exitcode.Usage(err)
		}
		if runs.Loaded(run) {
			if !auto {
				return nil, nil, exitcode.Usage(fmt.Errorf("%s is a κ calibration launch (a load beside backward): give it with --kappa auto, not as an input", dir))
			}
			loaded = append(loaded, run)
			continue
		}
		clean = append(clean, run)
		if !auto {
			continue
		}
		found, _ := filepath.Glob(filepath.Join(dir, kappaDir, "*", kappaDir))
		for _, k := range found {
			if kr, err := store.ReadRun(k); err == nil && runs.Loaded(kr) {
				loaded = append(loaded, kr)
			}
		}
	}
	if len(clean) == 0 {
		return nil, nil, exitcode.Usage(errors.New("no one-rank run without the κ calibration's load to predict from"))
	}
	return clean, loaded, nil
}

// studyArg is run's study path ("" for --resume, which takes none).
func studyArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}
