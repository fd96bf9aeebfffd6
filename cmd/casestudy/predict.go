package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/bench"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/predict/runs"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

func init() { register(newPredictCommand) }

// predictFlags are the prediction's target, shared by `predict`, `run
// --predict` and `plan --topology` (each adds the flags it takes).
type predictFlags struct {
	gpus     int
	topology string
	fit      string
	// fitBeside: bench allreduce --beside results, the collectives' cost
	// while the ranks compute (predict.Options.Beside)
	fitBeside string
	algo      string
	proto     string
	kappa     float64
	kappaArg  string // --kappa: a factor, or auto (parseKappa)
	auto      bool   // --kappa auto: κ from the calibration launch (predict_kappa.go)
	load      string // run --interfere C:B: this run is a κ calibration launch
	cores     int
	against   []string
	out       string
	json      bool

	calibration *predict.Calibration // --kappa auto's evidence
	perGPU      int                  // predict --ranks-per-gpu: ranks time-sharing one GPU (a rehearsal)
	concurrent  bool                 // predict --concurrent-inputs: CPU inputs measured as N copies at once
	perRank     bool                 // predict --launch-per-rank: each rank draws from a launch of its own
	draws       bool                 // predict --collective-draws: each step draws its collectives' times from the calibration's
	interpolate bool                 // --fit-interpolate: the benchmark's points joined by lines within its sizes

	// fitStretch: bench allreduce --interference results, the compute a
	// collective costs the backward (predict.Options.Stretch)
	fitStretch string
	// stretches: --kappa auto with stretch calibration runs (run --interfere
	// gloo): each trial's own κ, by trial key (predict_kappa.go)
	stretches map[string]predict.Calibration
}

// addPredictModelFlags adds the cost model's flags (--topology, --fit,
// --fit-interpolate, --nccl-algo, --nccl-proto, --kappa, --cores,
// --collective-draws).
func addPredictModelFlags(f *pflag.FlagSet, o *predictFlags) {
	f.StringVar(&o.topology, "topology", "", "predict with NCCL's tuning model on this topology: "+
		fmt.Sprint(predict.Topologies())+" or a topology .json file (docs/predict.md)")
	f.StringVar(&o.fit, "fit", "", "predict with an alpha-beta fit to this `casestudy bench allreduce --json` result (several, comma-separated: one fit to all their points) instead of a topology")
	f.BoolVar(&o.interpolate, "fit-interpolate", false, "with --fit: a size between two of the benchmark's sizes takes the "+
		"straight line between their measured times, not the alpha-beta line through every size (sizes outside them: the "+
		"fit) (docs/predict.md)")
	f.StringVar(&o.fitBeside, "fit-beside", "", "CPU ranks, with --fit: an alpha-beta fit to `casestudy bench allreduce --beside K --json` "+
		"results (several, comma-separated), the collectives' cost while the ranks compute: a collective that overlaps the "+
		"backward runs at this pace until every rank's backward ended (docs/predict.md)")
	f.StringVar(&o.fitStretch, "fit-stretch", "", "CPU ranks, with --fit: a fit to the compute loops of `casestudy bench allreduce "+
		"--interference P --json` results on --gpus ranks (several, comma-separated): the compute a collective costs the backward "+
		"it overlaps, which stretches each rank's backward by the collectives beside it (docs/predict.md)")
	f.StringVar(&o.algo, "nccl-algo", "", "restrict the NCCL model to one algorithm (Ring, Tree), as NCCL_ALGO does")
	f.StringVar(&o.proto, "nccl-proto", "", "restrict the NCCL model to one protocol (LL, LL128, Simple), as NCCL_PROTO does")
	f.StringVar(&o.kappaArg, "kappa", "1", "backward slowdown while a collective overlaps it: a factor (1: none), or auto: "+
		"measured by the κ calibration launch (run --predict runs it; predict reads RUN_DIR/kappa or a calibration run given "+
		"as a RUN_DIR) (docs/predict.md)")
	f.IntVar(&o.cores, "cores", 0, "CPU ranks: the cores they share (default: this machine's)")
	f.BoolVar(&o.draws, "collective-draws", true, "with --kappa auto's stretch calibration: each simulated step draws every "+
		"collective's time from the times the calibration measured for its size (their spread, a few collectives stalling), "+
		"not their median; false: the median (docs/predict.md, \"The collectives' tail\")")
}

func newPredictCommand() *cobra.Command {
	var o predictFlags
	var published bool
	cmd := &cobra.Command{
		Use:   "predict RUN_DIR...",
		Short: "Predict a one-rank run's trials on N GPUs (predicted.json, predicted.md); never measurements",
		Long: "predict reads a run whose trials ran as a world of one with the reducer on (casestudy run --predict N " +
			"records it), simulates each trial's reducer schedule on --gpus ranks with a collective cost model " +
			"(--topology: NCCL's tuning formulas on a named machine; --fit: an alpha-beta fit to a bench allreduce " +
			"result) and writes predicted.json and predicted.md into the run directory or --out. With --against a " +
			"measured run of the same study on those ranks, it prints each trial's error, the median absolute error " +
			"and whether the best trial is the same. Several RUN_DIRs (one-rank runs of the same study) and several --against " +
			"runs pool their launches by trial, for launches interleaved in time on a busy host. " +
			"Predictions never enter verdicts, baselines, compare or history. " +
			"See docs/predict.md.",

		RunE: func(cmd *cobra.Command, args []string) error {
			if published {
				rows, err := predict.Reproduce()
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), predict.ReproductionTable(rows))
				return nil
			}
			if len(args) == 0 {
				return exitcode.Usage(errors.New("predict needs RUN_DIR (or --published)"))
			}
			if err := checkModelFlags(cmd, &o); err != nil {
				return err
			}
			return runPredict(cmd.OutOrStdout(), args, o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&published, "published", false, "print the published collective figures next to the NCCL model on each topology, and exit")
	f.IntVar(&o.gpus, "gpus", 0, "ranks to predict for (required)")
	addPredictModelFlags(f, &o)
	f.BoolVar(&o.concurrent, "concurrent-inputs", false, "CPU ranks: the one-rank RUN_DIRs ran as --gpus copies at once on "+
		"this host, sharing it as the ranks do (scripts/predict-validate.sh): their compute is taken as it is, not scaled by "+
		"ranks x threads / cores (docs/predict.md)")
	f.BoolVar(&o.perRank, "launch-per-rank", false, "each rank of a predicted launch draws its steps from a one-rank launch of its "+
		"own (every set of --gpus distinct launches), not every rank from the same launch (docs/predict.md)")
	f.IntVar(&o.perGPU, "ranks-per-gpu", 1, "the target's ranks share GPUs, this many to a GPU (a one-GPU rehearsal, "+
		"run --rehearse: all of them): each rank's GPU compute is that many times slower (docs/predict.md)")
	f.StringSliceVar(&o.against, "against", nil, "a measured run of the same study on --gpus ranks to check the predictions against "+
		"(several, repeated or comma-separated: their launches pooled)")
	f.StringVar(&o.out, "out", "", "folder for predicted.json and predicted.md (default: the run directory)")
	f.BoolVar(&o.json, "json", false, "print predicted.json's content instead of the Markdown")
	return cmd
}

// costModel is the flags' cost model and its own error (the band's part).
func (o predictFlags) costModel(ranks int) (predict.CostModel, float64, error) {
	switch {
	case o.topology != "" && o.fit != "":
		return nil, 0, exitcode.Usage(errors.New("give --topology or --fit, not both"))
	case o.interpolate && o.fit == "":
		return nil, 0, exitcode.Usage(errors.New("--fit-interpolate joins the points of --fit's benchmark: give --fit too"))
	case o.topology != "":
		t, err := predict.LoadTopology(o.topology)
		if err != nil {
			return nil, 0, exitcode.Usage(err)
		}
		if ranks > t.MaxRanks() {
			return nil, 0, exitcode.Usage(fmt.Errorf("--topology %s has %d GPUs, fewer than the %d to predict for", t.Name, t.MaxRanks(), ranks))
		}
		e, err := predict.TopologyError(t)
		if err != nil {
			return nil, 0, err
		}
		return predict.NCCL{Topo: t, Algo: o.algo, Proto: o.proto}, e, nil
	case o.fit != "":
		m, pts, err := fitBench("--fit", o.fit, false)
		if err != nil {
			return nil, 0, err
		}
		if !o.interpolate {
			return m, predict.FitError(m, pts, m.Ranks), nil
		}
		in, err := predict.NewInterpolated(pts, m.Ranks, m.Source, m)
		if err != nil {
			return nil, 0, exitcode.Usage(fmt.Errorf("--fit %s with --fit-interpolate: %w", o.fit, err))
		}
		// The band: the largest error of an inner size interpolated from its
		// neighbours, or the fit's own where it is larger (sizes outside the
		// points take the fit).
		e := predict.FitError(m, pts, m.Ranks)
		if l, ok := in.LeaveOneOutError(); ok && l > e {
			e = l
		}
		return in, e, nil
	}
	return nil, 0, exitcode.Usage(errors.New("give --topology NAME or --fit BENCH.json (the collective cost model)"))
}

// besideModel is --fit-beside's cost model: the collectives beside busy
// compute threads (nil without the flag).
func (o predictFlags) besideModel() (predict.CostModel, error) {
	if o.fitBeside == "" {
		return nil, nil
	}
	if o.fit == "" {
		return nil, exitcode.Usage(errors.New("--fit-beside goes with --fit (the collectives alone)"))
	}
	m, _, err := fitBench("--fit-beside", o.fitBeside, true)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// stretchModel is --fit-stretch's model: the compute a collective costs the
// backward it overlaps (nil without the flag).
func (o predictFlags) stretchModel() (*predict.Stretch, error) {
	if o.fitStretch == "" {
		return nil, nil
	}
	if o.fit == "" {
		return nil, exitcode.Usage(errors.New("--fit-stretch goes with --fit (CPU ranks, Gloo)"))
	}
	var pts []predict.StretchPoint
	for _, file := range strings.Split(o.fitStretch, ",") {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, exitcode.Usage(fmt.Errorf("--fit-stretch: %w", err))
		}
		var r bench.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, exitcode.Usage(fmt.Errorf("--fit-stretch %s: not a `casestudy bench allreduce --json` result: %w", file, err))
		}
		if r.Ranks != o.gpus {
			return nil, exitcode.Usage(fmt.Errorf("--fit-stretch %s: %d ranks: give results on the --gpus %d ranks predicted for", file, r.Ranks, o.gpus))
		}
		if r.Interference < 1 {
			return nil, exitcode.Usage(fmt.Errorf("--fit-stretch %s: no compute loops: give results of bench allreduce --interference P (P > 0)", file))
		}
		for _, row := range r.Rows {
			if row.Compute == nil {
				return nil, exitcode.Usage(fmt.Errorf("--fit-stretch %s: the %d-byte row has no compute loops", file, row.Bytes))
			}
			pts = append(pts, predict.StretchPoint{Bytes: row.Bytes, StealMS: row.Compute.StealMS, CommMS: row.Compute.CommMS})
		}
	}
	name := filepath.Base(o.fitStretch)
	if n := strings.Count(o.fitStretch, ",") + 1; n > 1 {
		name = fmt.Sprintf("%d results", n)
	}
	m, err := predict.FitStretch(pts, o.gpus, fmt.Sprintf("%s, %d points, %d ranks", name, len(pts), o.gpus))
	if err != nil {
		return nil, exitcode.Usage(fmt.Errorf("--fit-stretch %s: %w", o.fitStretch, err))
	}
	return &m, nil
}

// fitBench is one alpha-beta fit to all the points of several `bench
// allreduce --json` results (comma-separated, the same ranks; benchmarks
// interleaved with the runs they predict), run beside busy compute threads
// (--beside) or not as beside says.
func fitBench(flag, files string, beside bool) (predict.AlphaBeta, []predict.Point, error) {
	var pts []predict.Point
	ranks, backend := 0, ""
	for _, file := range strings.Split(files, ",") {
		b, err := os.ReadFile(file)
		if err != nil {
			return predict.AlphaBeta{}, nil, exitcode.Usage(fmt.Errorf("%s: %w", flag, err))
		}
		var r bench.Result
		if err := json.Unmarshal(b, &r); err != nil {
			return predict.AlphaBeta{}, nil, exitcode.Usage(fmt.Errorf("%s %s: not a `casestudy bench allreduce --json` result: %w", flag, file, err))
		}
		if ranks != 0 && r.Ranks != ranks {
			return predict.AlphaBeta{}, nil, exitcode.Usage(fmt.Errorf("%s %s: %d ranks, the others %d: give results of one rank count", flag, file, r.Ranks, ranks))
		}
		if beside != (r.Beside > 0) {
			want := map[bool]string{true: "run with bench allreduce --beside K (K > 0)", false: "run without --beside"}[beside]
			return predict.AlphaBeta{}, nil, exitcode.Usage(fmt.Errorf("%s %s: beside %d: give results %s", flag, file, r.Beside, want))
		}
		ranks, backend = r.Ranks, r.Backend
		for _, row := range r.Rows {
			pts = append(pts, predict.Point{Bytes: row.Bytes, MS: row.FitMS()})
		}
	}
	name := filepath.Base(files)
	if n := strings.Count(files, ",") + 1; n > 1 {
		name = fmt.Sprintf("%d results", n)
	}
	m, err := predict.FitAlphaBeta(pts, ranks, fmt.Sprintf("%s (%s, %d ranks)", name, backend, ranks))
	if err != nil {
		return predict.AlphaBeta{}, nil, exitcode.Usage(fmt.Errorf("%s %s: %w", flag, files, err))
	}
	return m, pts, nil
}

func runPredict(w io.Writer, dirs []string, o predictFlags) error {
	if o.gpus < 2 {
		return exitcode.Usage(fmt.Errorf("--gpus %d: give the ranks to predict for, 2 or more", o.gpus))
	}
	if err := o.parseKappa(); err != nil {
		return err
	}
	if o.perGPU < 1 || o.perGPU > o.gpus {
		return exitcode.Usage(fmt.Errorf("--ranks-per-gpu %d: give 1 to --gpus (%d)", o.perGPU, o.gpus))
	}
	if _, _, err := o.costModel(o.gpus); err != nil { // the flags first, then the files
		return err
	}
	if _, err := o.besideModel(); err != nil {
		return err
	}
	if _, err := o.stretchModel(); err != nil {
		return err
	}
	rs, loaded, err := readPredictRuns(dirs, o.auto)
	if err != nil {
		return err
	}
	run := rs[0]
	if o.auto {
		if err := o.readCalibration(rs, loaded); err != nil {
			return err
		}
	}
	out := o.out
	if out == "" {
		out = dirs[0]
	} else {
		// Not another run's directory: its report would show these
		// predictions as its own (the first RUN_DIR's, or a copy of it, is fine).
		if _, err := store.CheckOutputDir("--out", out, run); err != nil {
			return err
		}
		if err := os.MkdirAll(out, 0o755); err != nil { // a new folder is made; a path that cannot be one is refused first
			return exitcode.Usage(fmt.Errorf("--out %s: %w", out, err))
		}
	}
	preds, v, err := predictRun(o, rs...)
	if err != nil {
		return err
	}
	if err := runs.Write(out, run, preds, v); err != nil {
		return outputErr(err)
	}
	if o.json {
		return writeJSON(w, runs.NewFile(run, preds, v))
	}
	fmt.Fprint(w, predict.Markdown(preds, runs.Changed(run), v))
	fmt.Fprintf(w, "\nwrote %s and %s in %s\n", runs.JSONFile, runs.MarkdownFile, absPath(out))
	return nil
}

// predictRun predicts every trial of one-rank runs of a study (the first
// names the trials; the others add launches), and checks them against
// o.against when given.
func predictRun(o predictFlags, rs ...*store.Run) ([]predict.Prediction, *predict.Validation, error) {
	cost, cerr, err := o.costModel(o.gpus)
	if err != nil {
		return nil, nil, err
	}
	run := rs[0]
	var sets [][]predict.TrialInput
	for _, r := range rs {
		in, err := runs.Inputs(r)
		if err != nil {
			return nil, nil, exitcode.Usage(err)
		}
		sets = append(sets, in)
	}
	ins := runs.Merge(sets...)
	beside, err := o.besideModel()
	if err != nil {
		return nil, nil, err
	}
	stretch, err := o.stretchModel()
	if err != nil {
		return nil, nil, err
	}
	setup := predict.Setup{Ranks: o.gpus, Cost: cost, CostError: cerr, Kappa: o.kappa, Calibration: o.calibration, Beside: beside,
		Stretch: stretch, LaunchPerRank: o.perRank, CollectiveDraws: o.draws}
	setup.ComputeScale, setup.Threads, setup.Cores = runs.ComputeScale(run, o.gpus, o.cores)
	if o.concurrent { // the inputs already shared the host as N ranks do
		setup.ComputeScale, setup.Concurrent = 1, true
	}
	if o.perGPU > 1 { // ranks time-sharing a GPU, as a rehearsal's do
		setup.ComputeScale *= float64(o.perGPU)
	}
	var preds []predict.Prediction
	for _, in := range ins {
		setup.Cost = cost
		if n, ok := cost.(predict.NCCL); ok { // the trial's own NCCL_ALGO / NCCL_PROTO
			if a := in.Knobs["nccl.algo"]; a != "" && a != "auto" {
				n.Algo = a
			}
			if p := in.Knobs["nccl.proto"]; p != "" && p != "auto" {
				n.Proto = p
			}
			setup.Cost = n
		}
		if o.stretches != nil { // the trial's own stretch calibration
			c, ok := o.stretches[runs.Key(in.Knobs)]
			if !ok {
				return nil, nil, exitcode.Usage(fmt.Errorf("--kappa auto: trial %s (%s) has no stretch calibration: run the study with --predict %d --interfere gloo", in.ID, runs.Key(in.Knobs), o.gpus))
			}
			setup.Kappa, setup.Calibration = c.Kappa, &c
			// Its buckets' collectives as the calibration timed them beside its
			// backward, alone and beside compute alike (other sizes: the fits).
			setup.Cost = predict.Calibrated{Ranks: o.gpus, Buckets: c.Buckets, Fallback: setup.Cost}
			fb := beside
			if fb == nil {
				fb = cost
			}
			setup.Beside = predict.Calibrated{Ranks: o.gpus, Buckets: c.Buckets, Fallback: fb}
		}
		p, err := predict.PredictTrial(in, setup)
		if err != nil {
			return nil, nil, exitcode.Usage(fmt.Errorf("%s: %w", run.Dir, err))
		}
		preds = append(preds, p)
	}
	if len(o.against) == 0 {
		return preds, nil, nil
	}
	var meas []*store.Run
	for _, dir := range o.against {
		m, err := store.ReadRun(dir)
		if err != nil {
			return nil, nil, exitcode.Usage(fmt.Errorf("--against: %w", err))
		}
		if runs.Loaded(m) || runs.ShadowRanks(m) > 0 { // a calibration is never a measurement of the trials
			return nil, nil, exitcode.Usage(fmt.Errorf("--against %s: a calibration launch (a load or a stretch calibration beside its backward), not a measurement of the trials", dir))
		}
		if err := runs.CheckRanks(m, o.gpus); err != nil {
			return nil, nil, exitcode.Usage(fmt.Errorf("--against: %w (--gpus %d)", err, o.gpus))
		}
		meas = append(meas, m)
	}
	launches := runs.MeasuredLaunches(meas...)
	medians := map[string]float64{}
	for k, l := range launches {
		medians[k] = predict.Median(l)
	}
	v := predict.Validate(preds, medians, func(p predict.Prediction) string { return runs.Key(p.Knobs) }, runs.Changed(run))
	keys := map[string]string{}
	for _, p := range preds {
		keys[p.ID] = runs.Key(p.Knobs)
	}
	runs.DecideWinner(&v, launches, func(id string) string { return keys[id] })
	return preds, &v, nil
}

// addRunPredictFlags adds `run --predict N` and the cost model's flags.
func addRunPredictFlags(f *pflag.FlagSet, o *predictFlags) {
	f.IntVar(&o.gpus, "predict", 0, "plan the study on `N` GPUs (ranks on cpu), run each trial as a world of one with "+
		"the reducer on, and write the trials predicted for N into predicted.json and predicted.md (docs/predict.md)")
	addPredictModelFlags(f, o)
	addRunInterfereFlag(f, o)
}

// expandPredicted is `run --predict N`'s plan: the study expanded on N ranks
// (so the data-parallel knobs are not dropped), to run on one rank.
func expandPredicted(s *study.Study, maxTrials int, o predictFlags) (*study.Plan, error) {
	if o.gpus < 2 {
		return nil, exitcode.Usage(fmt.Errorf("--predict %d: give the GPUs to predict for, 2 or more", o.gpus))
	}
	if o.topology == "" && o.fit == "" {
		return nil, exitcode.Usage(errors.New("--predict needs --topology NAME or --fit BENCH.json (the collective cost model)"))
	}
	if err := o.parseKappa(); err != nil {
		return nil, err
	}
	if _, _, err := o.costModel(o.gpus); err != nil {
		return nil, err
	}
	if _, err := o.besideModel(); err != nil {
		return nil, err
	}
	if _, err := o.stretchModel(); err != nil {
		return nil, err
	}
	if s.Baseline["pipeline.stages"] != "" && s.Baseline["pipeline.stages"] != "1" {
		return nil, exitcode.Usage(errors.New("--predict: the study has pipeline stages; predictions cover data parallelism only"))
	}
	w := s.Workload
	s.Workload.GPUs, s.Workload.Ranks, s.Workload.Nodes = o.gpus, o.gpus, 1
	plan, err := study.Expand(s, study.ExpandOptions{MaxTrials: maxTrials})
	s.Workload = w
	s.Workload.GPUs, s.Workload.Ranks, s.Workload.Nodes = 1, 1, 1
	if err == nil {
		for _, t := range plan.Trials {
			if d := t.Knobs["tp.degree"]; d != "" && d != "1" {
				return nil, exitcode.Usage(fmt.Errorf("--predict: trial %s has tp.degree %s; predictions cover data parallelism only (a world of one has no tensor group)", t.ID, d))
			}
		}
		if err := shadowTrials(plan, o, w.Device); err != nil {
			return nil, err
		}
	}
	return plan, err
}

// shadowTrials refuses, before anything runs, a trial the stretch
// calibration cannot load: CASESTUDY_INTERFERE=gloo:N (run --interfere gloo,
// and --kappa auto on CPU ranks, which runs it) sends the DDP reducer's
// buckets to a Gloo group of N (engine/native/src/shadow_gloo.cpp), and ZeRO
// (zero.stage 1 or 2) replaces that reducer. The engine refuses it too, at
// create. device is the study's workload.device: with auto, --kappa auto's
// calibration launch (--interfere gloo) refuses it when it starts.
func shadowTrials(plan *study.Plan, o predictFlags, device string) error {
	how := ""
	switch {
	case o.load == "gloo":
		how = "--interfere gloo (the stretch calibration)"
	case o.load == "" && o.auto && device == "cpu":
		how = "--kappa auto on CPU ranks (the stretch calibration, --interfere gloo)"
	default:
		return nil
	}
	for _, t := range plan.Trials {
		if z := t.Knobs["zero.stage"]; z != "" && z != "0" {
			return exitcode.Usage(fmt.Errorf("%s: zero.stage %s in trial %s; the calibration sends the DDP reducer's buckets to its Gloo group, "+
				"and ZeRO replaces the reducer: sweep zero.stage 0 only, or give --kappa a factor", how, z, t.ID))
		}
	}
	return nil
}

// predictThreads is `run --predict N` on CPU ranks: the one-rank run computes
// with the threads each of the N ranks will get (the runner's default for N
// ranks: cores/N), not with every core, so that its compute is what one rank
// of the N-rank run computes (docs/predict.md); the manifest records it and
// the prediction's inputs carry it. A study's own workload.threads stays.
func predictThreads(s *study.Study, m *runner.Machine, o predictFlags) {
	if o.gpus < 2 || m.Device != "cpu" || s.Workload.Threads != 0 {
		return
	}
	cores := o.cores
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	s.Workload.Threads = max(1, cores/o.gpus)
}

// predictAfterRun writes the run's predicted trials (run --predict), after
// the κ calibration launch with --kappa auto; a calibration launch itself
// predicts nothing.
func predictAfterRun(cmd *cobra.Command, w io.Writer, dir, studyPath string, o predictFlags) error {
	if o.load == "gloo" {
		fmt.Fprintf(w, "stretch calibration launch (the trials' buckets on a Gloo group of %d every other step): no predictions from it\n", o.gpus)
		return nil
	}
	if o.load != "" {
		fmt.Fprintf(w, "κ calibration launch (a load of %s beside each backward pass): no predictions from it\n", o.load)
		return nil
	}
	if err := o.parseKappa(); err != nil {
		return err
	}
	run, err := store.ReadRun(dir)
	if err != nil {
		return err
	}
	if o.auto {
		kdir, err := calibrate(cmd, w, dir, studyPath, o)
		if err != nil {
			return err
		}
		k, err := store.ReadRun(kdir)
		if err != nil {
			return fmt.Errorf("the κ calibration launch: %w", err)
		}
		if err := o.readCalibration([]*store.Run{run}, []*store.Run{k}); err != nil {
			return err
		}
		if cal := o.calibration; cal != nil {
			fmt.Fprintf(w, "κ = %.3f: backward %.2f ms alone, %.2f ms beside the load (%.1f GB/s reached, %d steps)\n",
				cal.Kappa, cal.BackwardMS, cal.LoadedBackwardMS, cal.LoadGBps, cal.Steps)
		}
		for _, t := range run.Trials {
			if c, ok := o.stretches[runs.Key(t.Knobs)]; ok {
				what := "(baseline)"
				if len(t.Changed) > 0 {
					what = strings.Join(t.Changed, ",")
				}
				fmt.Fprintf(w, "stretch calibration %s %s: κ %.3f (backward %.2f ms clean, %.2f ms beside its collectives, %d steps)\n",
					t.ID, what, c.Kappa, c.BackwardMS, c.LoadedBackwardMS, c.Steps)
			}
		}
	}
	preds, _, err := predictRun(o, run)
	if err != nil {
		return err
	}
	if err := runs.Write(dir, run, preds, nil); err != nil {
		return outputErr(err)
	}
	fmt.Fprintf(w, "predicted %d trials on %d ranks (%s): %s\n", len(preds), o.gpus, preds[0].Model,
		filepath.Join(absPath(dir), runs.MarkdownFile))
	return nil
}

// withPlanTopology adds `plan --topology NAME`: after the plan, what a
// prediction on that machine would do (the trials `run --predict` predicts and
// the model's all-reduce at each bucket size). It reads the GPU count from
// plan's --gpus when the command has one, else from the study.
func withPlanTopology(cmd *cobra.Command) {
	var topology string
	cmd.Flags().StringVar(&topology, "topology", "", "also show the prediction's collective model on this topology ("+
		fmt.Sprint(predict.Topologies())+" or a .json file) for the trials on --gpus GPUs (docs/predict.md)")
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := inner(c, args); err != nil || topology == "" {
			return err
		}
		allow, _ := c.Flags().GetBool("allow-outside")
		s, err := loadStudy(args[0], allow)
		if err != nil {
			return err
		}
		gpus := max(s.Workload.GPUs, s.Workload.Ranks)
		if f := c.Flags().Lookup("gpus"); f != nil && f.Changed {
			if gpus, err = c.Flags().GetInt("gpus"); err != nil {
				return exitcode.Usage(fmt.Errorf("--gpus: %w", err))
			}
		}
		return writePlanPrediction(c.OutOrStdout(), s, args[0], topology, gpus)
	}
}

func writePlanPrediction(w io.Writer, s *study.Study, path, topology string, gpus int) error {
	t, err := predict.LoadTopology(topology)
	if err != nil {
		return exitcode.Usage(err)
	}
	if gpus < 2 || gpus > t.MaxRanks() {
		return exitcode.Usage(fmt.Errorf("--topology %s: predictions are for 2 to %d GPUs; the plan has %d (give --gpus N)", t.Name, t.MaxRanks(), gpus))
	}
	plan, err := expandPredicted(s, study.DefaultMaxTrials, predictFlags{gpus: gpus, topology: topology})
	if err != nil {
		return err
	}
	m := predict.NCCL{Topo: t}
	cerr, err := predict.TopologyError(t)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nprediction on %d GPUs of %s (%s; model error on its published points %.1f%%):\n", gpus, t.Name, t.Description, 100*cerr)
	fmt.Fprintf(w, "  %d trials would be predicted from one-GPU runs: casestudy run %s --predict %d --topology %s\n",
		len(plan.Trials), path, gpus, topology)
	seen := map[string]bool{}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  BUCKET\tALL-REDUCE\tBUSBW\tNCCL CHOICE")
	for _, tr := range plan.Trials {
		mb := tr.Knobs["ddp.bucket_mb"]
		if mb == "" || seen[mb] {
			continue
		}
		seen[mb] = true
		v, err := strconv.ParseFloat(mb, 64)
		if err != nil {
			continue
		}
		bytes := int64(v * (1 << 20))
		ms, how, err := m.Time(predict.AllReduce, bytes, gpus)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s MiB\t%.3f ms\t%.1f GB/s\t%s\n", mb, ms, predict.BusBW(predict.AllReduce, bytes, gpus, ms), how)
	}
	return tw.Flush()
}
