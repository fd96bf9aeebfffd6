package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// fixture is a study written to a temporary studies tree, expanded, with a
// fresh run directory.
type fixture struct {
	dir   string
	study *study.Study
	plan  *study.Plan
	w     *store.Writer
}

func newFixture(t *testing.T, yaml string) *fixture {
	t.Helper()
	dir := t.TempDir()
	writeStudy(t, dir, yaml)
	return loadFixture(t, dir, nil)
}

// writeStudy writes text as dir/studies/test.yaml and returns its path.
func writeStudy(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "studies", "test.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// loadPlan loads and expands the study at path.
func loadPlan(t *testing.T, path string) (*study.Study, *study.Plan) {
	t.Helper()
	s, err := study.Load(path, study.LoadOptions{})
	require.NoError(t, err)
	plan, err := study.Expand(s, study.ExpandOptions{})
	require.NoError(t, err)
	return s, plan
}

func loadFixture(t *testing.T, dir string, w *store.Writer) *fixture {
	t.Helper()
	path := filepath.Join(dir, "studies", "test.yaml")
	s, plan := loadPlan(t, path)
	var err error
	if w == nil {
		w, err = store.Create(filepath.Join(dir, "results"), s.Name, store.NewRunID(time.Now()),
			&store.Manifest{Study: s.Name, StudyPath: path, StudySHA256: s.SHA256})
		require.NoError(t, err)
	}
	t.Cleanup(func() { w.Close() })
	return &fixture{dir: dir, study: s, plan: plan, w: w}
}

// options runs the test binary as the worker, with short deadlines.
func (f *fixture) options() Options {
	exe, _ := os.Executable()
	return Options{Study: f.study, Plan: f.plan, Writer: f.w,
		Machine:    &Machine{Device: "cpu", EngineLib: "fake"},
		Executable: exe, WorkerArgs: []string{},
		Env:            append(os.Environ(), roleEnv+"=worker"),
		HeartbeatEvery: 50 * time.Millisecond, HeartbeatLimit: 20 * time.Second,
		KillGrace: 200 * time.Millisecond, SampleEvery: 50 * time.Millisecond}
}

func (f *fixture) run(t *testing.T, ctx context.Context, o Options) (*store.Run, error) {
	t.Helper()
	r, err := New(o)
	require.NoError(t, err)
	_, runErr := r.Run(ctx)
	run, err := store.ReadRun(f.w.Dir)
	require.NoError(t, err)
	return run, runErr
}

func byID(run *store.Run) map[string]store.TrialRecord {
	out := map[string]store.TrialRecord{}
	for _, t := range run.Trials {
		out[t.ID] = t
	}
	return out
}

func idOf(t *testing.T, p *study.Plan, kind string) string {
	t.Helper()
	for _, tr := range p.Trials {
		if tr.Knobs["fault.kind"] == kind || (kind == "" && len(tr.Changed) == 0) {
			return tr.ID
		}
	}
	t.Fatalf("no trial with fault.kind %q", kind)
	return ""
}

const faultsStudy = `name: runner-faults
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 1, timeout: 3s}
baseline: {precision: fp32}
sweep:
  strategy: list
  trials:
    - {fault.kind: hang, fault.rank: 1, fault.at_step: 1}
    - {fault.kind: none}
    - {fault.kind: crash, fault.rank: 1, fault.at_step: 2}
    - {fault.kind: exit, fault.rank: 0, fault.at_step: 0}
    - {fault.kind: abort, fault.rank: 1, fault.at_step: 1}
    - {fault.kind: error, fault.rank: 0, fault.at_step: 1}
    - {fault.kind: oom, fault.rank: 1, fault.at_step: 0}
    - {fault.kind: slow, fault.rank: 0, fault.at_step: 0, fault.slow_ms: 20}
    - {precision: fp16}
    - {nccl.algo: Ring}
`

// TestFaultOutcomes: a hanging rank is killed at the trial deadline and
// recorded as timeout while the next trials still run; crashes record the
// first failing rank with its signal or exit code; engine errors keep their
// text; a dropped combination is recorded as skipped.
func TestFaultOutcomes(t *testing.T) {
	f := newFixture(t, faultsStudy)
	run, err := f.run(t, context.Background(), f.options())
	require.NoError(t, err)
	recs := byID(run)
	require.Len(t, recs, len(f.plan.Trials)+len(f.plan.Dropped), "one record per trial, no duplicate")

	hang := recs[idOf(t, f.plan, "hang")]
	assert.Equal(t, store.Timeout, hang.Outcome)
	assert.Contains(t, hang.Error, "exceeded its timeout of 3s")
	assert.Contains(t, hang.Error, "rank1=0", "the hanging rank's last completed step")
	require.Len(t, hang.Repeats, 1)
	assert.Equal(t, 0, hang.Repeats[0].Ranks[1].LastStep)

	ok := recs[idOf(t, f.plan, "none")]
	assert.Equal(t, store.OK, ok.Outcome, ok.Error)
	require.NotNil(t, ok.Summary)
	// by summed step times: 2 ranks x 2 samples per 5 ms step; the launch's
	// value is over the window's wall clock, which also holds the time
	// between the engine's calls, so it is lower
	bySteps, _ := measure.Throughput(ok.Repeats[0].Ranks)
	assert.InDelta(t, 2*2/0.005, bySteps, 2*2/0.005*0.01, "2 ranks x 2 samples per 5 ms step")
	assert.Equal(t, measure.WindowBasis, ok.Repeats[0].Basis)
	assert.LessOrEqual(t, ok.Repeats[0].SamplesPerS, bySteps*1.001)
	assert.Greater(t, ok.Repeats[0].SamplesPerS, bySteps/4)
	rank0 := ok.Repeats[0].Ranks[0]
	assert.Len(t, rank0.Steps, 3)
	assert.Equal(t, 1, rank0.WarmupSteps)
	assert.NotNil(t, rank0.Checksum)
	assert.Contains(t, ok.Command, "--trial "+ok.ID)

	crash := recs[idOf(t, f.plan, "crash")]
	assert.Equal(t, store.Crashed, crash.Outcome)
	assert.Equal(t, 1, crash.FailedRank)
	assert.Equal(t, "SIGKILL", crash.Signal)
	assert.Contains(t, crash.Error, "rank 1 was killed by SIGKILL")

	exit := recs[idOf(t, f.plan, "exit")]
	assert.Equal(t, store.Crashed, exit.Outcome)
	assert.Equal(t, 0, exit.FailedRank)
	assert.Equal(t, 1, exit.ExitCode)
	assert.Empty(t, exit.Signal)

	abort := recs[idOf(t, f.plan, "abort")]
	assert.Equal(t, store.Crashed, abort.Outcome)
	assert.Equal(t, "SIGABRT", abort.Signal)
	assert.Equal(t, 1, abort.FailedRank)

	engErr := recs[idOf(t, f.plan, "error")]
	assert.Equal(t, store.Failed, engErr.Outcome)
	assert.Contains(t, engErr.Error, "injected engine error")
	assert.Equal(t, 0, engErr.FailedRank)

	oom := recs[idOf(t, f.plan, "oom")]
	assert.Equal(t, store.OOM, oom.Outcome)
	assert.Contains(t, oom.Error, "out of memory")

	slow := recs[idOf(t, f.plan, "slow")]
	assert.Equal(t, store.OK, slow.Outcome)
	// throughput follows the slowest rank: 4 samples per 25 ms step (by step
	// times; the window's wall clock is at least the slowest rank's steps)
	slowBySteps, _ := measure.Throughput(slow.Repeats[0].Ranks)
	assert.InDelta(t, 4/0.025, slowBySteps, 4/0.025*0.01)
	assert.LessOrEqual(t, slow.Repeats[0].SamplesPerS, slowBySteps*1.001)

	var fp16 store.TrialRecord
	for _, r := range recs {
		if r.Knobs["precision"] == "fp16" {
			fp16 = r
		}
	}
	assert.Equal(t, store.Unsupported, fp16.Outcome)
	assert.Contains(t, fp16.Error, "fp16 is not supported")

	skipped := 0
	for _, r := range recs {
		if r.Outcome == store.Skipped {
			skipped++
			assert.Contains(t, r.Error, "no effect on device cpu")
		}
	}
	assert.Equal(t, 1, skipped)
	// logs of every rank of every launch
	_, err = os.Stat(filepath.Join(f.w.Dir, store.LogName(hang.ID, 1, 0)))
	assert.NoError(t, err)
}

func TestHeartbeatSilenceIsTimeout(t *testing.T) {
	f := newFixture(t, strings.Replace(faultsStudy, "timeout: 3s", "timeout: 60s", 1))
	f.plan.Trials = f.plan.Trials[:1] // the hang
	f.plan.Dropped = nil
	o := f.options()
	o.HeartbeatLimit = 500 * time.Millisecond
	start := time.Now()
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	assert.Equal(t, store.Timeout, run.Trials[0].Outcome)
	assert.Equal(t, 1, run.Trials[0].FailedRank)
	assert.Contains(t, run.Trials[0].Error, "rank 1 sent no heartbeat for 500ms")
	assert.Less(t, time.Since(start), 20*time.Second)
}

const envStudy = `name: runner-env
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 1, warmup_steps: 0, steps: 1, timeout: 30s}
baseline: {cuda.device_max_connections: 1, nccl.debug: default}
`

// TestAutoInheritsDefaultUnsetsInTheRanks: nccl.algo is auto, so NCCL_ALGO set by the
// parent shell reaches the trial (a site's setting stands); nccl.debug is
// default, so the parent's NCCL_DEBUG does not; a set knob replaces the
// parent's value; NVLS stays off whatever the parent says.
func TestAutoInheritsDefaultUnsetsInTheRanks(t *testing.T) {
	f := newFixture(t, envStudy)
	o := f.options()
	o.Env = append(o.Env, "NCCL_ALGO=Tree", "CUDA_DEVICE_MAX_CONNECTIONS=8", "NCCL_DEBUG=WARN", "NCCL_NVLS_ENABLE=1")
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	require.Equal(t, store.OK, run.Trials[0].Outcome, run.Trials[0].Error)
	log, err := os.ReadFile(filepath.Join(f.w.Dir, store.LogName(run.Trials[0].ID, 0, 0)))
	require.NoError(t, err)
	assert.Contains(t, string(log), "env NCCL_ALGO=Tree\n")
	assert.Contains(t, string(log), "env NCCL_DEBUG=<unset>\n")
	assert.Contains(t, string(log), "env CUDA_DEVICE_MAX_CONNECTIONS=1\n")
	assert.Contains(t, string(log), "env NCCL_NVLS_ENABLE=0\n")
}

const mpsStudy = `name: runner-mps
model: {family: gpt, preset: tiny}
workload: {device: cuda, gpus: 1, warmup_steps: 0, steps: 1, timeout: 30s}
baseline: {mps: true, procs_per_gpu: 2}
`

func TestMPSMissingIsUnsupported(t *testing.T) {
	f := newFixture(t, mpsStudy)
	o := f.options()
	o.Machine = &Machine{Device: "cuda", GPUs: []string{"0"}, EngineLib: "fake"} // no MPS control binary
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	assert.Equal(t, store.Unsupported, run.Trials[0].Outcome)
	assert.Contains(t, run.Trials[0].Error, "nvidia-cuda-mps-control not found")
	assert.Equal(t, "", FindMPSControl(t.TempDir()))
}

// TestMPSLifecycle runs the daemon start/stop against a stand-in control
// program that records how it was called.
func TestMPSLifecycle(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	ctl := filepath.Join(dir, MPSControlName)
	script := "#!/bin/sh\necho \"args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY stdin=$(test \"$1\" = -d || cat)\" >> " + calls + "\necho \"called with $*\" >> $CUDA_MPS_LOG_DIRECTORY/control.log\n"
	require.NoError(t, os.WriteFile(ctl, []byte(script), 0o755))
	assert.Equal(t, ctl, FindMPSControl("/nonexistent:"+dir))
	d, err := startMPS(context.Background(), ctl, os.Environ())
	require.NoError(t, err)
	env := d.Env(50)
	assert.Equal(t, "50", env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
	assert.DirExists(t, env["CUDA_MPS_PIPE_DIRECTORY"])
	log, err := d.Stop(os.Environ())
	require.NoError(t, err)
	assert.Equal(t, "called with -d\ncalled with \n", string(log), "the control log is kept")
	assert.NoDirExists(t, env["CUDA_MPS_PIPE_DIRECTORY"])
	b, _ := os.ReadFile(calls)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "args=-d pipe="+env["CUDA_MPS_PIPE_DIRECTORY"])
	assert.Contains(t, lines[1], "args= pipe="+env["CUDA_MPS_PIPE_DIRECTORY"])
	assert.Contains(t, lines[1], "stdin=quit")
}

type recorder struct {
	nopProgress
	mu     sync.Mutex
	starts []string
	counts [][2]int // n of total, per launch
}

func (r *recorder) TrialStart(n, total int, rec *store.TrialRecord, rep, reps int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, rec.Knobs["micro_batch"]+"/"+string(rune('0'+rep)))
	r.counts = append(r.counts, [2]int{n, total})
}

const repeatStudy = `name: runner-repeats
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 0, steps: 2, repeats: 2, timeout: 30s, interleave: true}
sweep:
  strategy: grid
  knobs: {micro_batch: [1, 2]}
`

func TestInterleavedRepeats(t *testing.T) {
	f := newFixture(t, repeatStudy)
	o := f.options()
	rec := &recorder{}
	o.Progress = rec
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, rec.starts, 4)
	assert.ElementsMatch(t, []string{"1/0", "2/0"}, rec.starts[:2], "round 1: each trial once, in a random order")
	assert.ElementsMatch(t, []string{"1/1", "2/1"}, rec.starts[2:], "round 2")
	assert.Equal(t, [][2]int{{1, 4}, {2, 4}, {3, 4}, {4, 4}}, rec.counts, "launch n of the 4 planned")
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		assert.Equal(t, store.OK, tr.Outcome, tr.Error)
		assert.Len(t, tr.Repeats, 2)
		assert.Equal(t, []int{0, 1}, []int{tr.Repeats[0].Repeat, tr.Repeats[1].Repeat})
	}
}

func TestGreedyPicksTheBestAndReusesTrials(t *testing.T) {
	f := newFixture(t, strings.NewReplacer("strategy: grid", "strategy: greedy",
		"{micro_batch: [1, 2]}", "{micro_batch: [1, 16], grad_accum: [1, 2]}", "repeats: 2", "repeats: 1").Replace(repeatStudy))
	o := f.options()
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	seen := map[string]int{}
	mb4 := false
	for _, tr := range run.Trials {
		seen[tr.ID]++
		assert.Equal(t, store.OK, tr.Outcome, tr.Error)
		if tr.Knobs["grad_accum"] == "2" {
			// round 2 starts from the winner of round 1: the larger micro-batch
			assert.Equal(t, "16", tr.Knobs["micro_batch"])
			mb4 = true
		}
	}
	assert.True(t, mb4, "round 2 ran")
	for id, n := range seen {
		assert.Equal(t, 1, n, "trial %s recorded once", id)
	}
}

// TestInterruptThenResume: cancelling (Ctrl-C) records the trial in flight as
// interrupted and stops; resuming re-runs it and what never started, once each.
func TestInterruptThenResume(t *testing.T) {
	f := newFixture(t, strings.Replace(repeatStudy, "micro_batch: [1, 2]", "micro_batch: [1, 2, 3]", 1))
	ctx, cancel := context.WithCancel(context.Background())
	o := f.options()
	o.Progress = &cancelAt{n: 2, cancel: cancel}
	o.Interleave = false
	f.study.Workload.Interleave = false
	run, err := f.run(t, ctx, o)
	require.ErrorIs(t, err, ErrInterrupted)
	outcomes := map[store.Outcome]int{}
	for _, tr := range run.Trials {
		outcomes[tr.Outcome]++
	}
	assert.Equal(t, map[store.Outcome]int{store.OK: 1, store.Interrupted: 1}, outcomes)

	resumed := resume(t, f)
	ids := map[string]int{}
	for _, tr := range resumed.Trials {
		ids[tr.ID]++
		assert.Equal(t, store.OK, tr.Outcome)
	}
	assert.Len(t, ids, 3)
	for id, n := range ids {
		assert.Equal(t, 1, n, id)
	}
}

// cancelAt cancels (as Ctrl-C does) when the n-th trial's first repeat is
// about to launch: the trials before it are complete, it has started and
// must be recorded interrupted, whatever the machine's speed.
type cancelAt struct {
	nopProgress
	n, seen int
	cancel  func()
}

func (c *cancelAt) TrialStart(n, total int, rec *store.TrialRecord, rep, reps int) {
	if rep != 0 {
		return
	}
	if c.seen++; c.seen == c.n {
		c.cancel()
	}
}

// resume reopens f's run directory the way `casestudy run --resume` does and
// finishes it.
func resume(t *testing.T, f *fixture) *store.Run {
	t.Helper()
	require.NoError(t, f.w.Close(), "the first writer is done")
	w, run, err := store.OpenExisting(f.w.Dir)
	require.NoError(t, err)
	g := loadFixture(t, f.dir, w)
	require.NoError(t, CheckResume(run, g.study))
	o := g.options()
	o.Previous = Committed(run)
	r, err := New(o)
	require.NoError(t, err)
	_, err = r.Run(context.Background())
	require.NoError(t, err)
	out, err := store.ReadRun(f.w.Dir)
	require.NoError(t, err)
	return out
}

func TestResumeRefusesAChangedStudy(t *testing.T) {
	f := newFixture(t, envStudy)
	path := filepath.Join(f.dir, "studies", "test.yaml")
	require.NoError(t, os.WriteFile(path, []byte(envStudy+"description: changed\n"), 0o644))
	run, err := store.ReadRun(f.w.Dir)
	require.NoError(t, err)
	g := loadFixture(t, f.dir, f.w)
	err = CheckResume(run, g.study)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed since")
}

// fakeRunnerMain is the runner process of TestKill9ThenResume.
func fakeRunnerMain() int {
	t := &testing.T{}
	dir := os.Getenv("CASESTUDY_TEST_DIR")
	s, err := study.Load(filepath.Join(dir, "studies", "test.yaml"), study.LoadOptions{})
	if err != nil {
		return 2
	}
	plan, _ := study.Expand(s, study.ExpandOptions{})
	w, _, err := store.OpenExisting(os.Getenv("CASESTUDY_TEST_RUN"))
	if err != nil {
		return 2
	}
	f := &fixture{dir: dir, study: s, plan: plan, w: w}
	o := f.options()
	o.Env = append(os.Environ(), roleEnv+"=worker")
	r, _ := New(o)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	_, err = r.Run(ctx)
	_ = t
	if errors.Is(err, ErrInterrupted) {
		return fakeRunnerInterrupted
	}
	if err != nil {
		return 1
	}
	return 0
}

// fakeRunnerInterrupted is fakeRunnerMain's exit status after a signal.
const fakeRunnerInterrupted = 4

// TestKill9ThenResume kills the runner process with SIGKILL mid-sweep; its
// workers die with it, and --resume completes the run with every trial
// exactly once.
func TestKill9ThenResume(t *testing.T) {
	f := newFixture(t, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1, 2, 3, 4]", "steps: 2", "steps: 6",
		"repeats: 2", "repeats: 1").Replace(repeatStudy))
	require.NoError(t, f.w.Close(), "the runner process below writes the run")
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=runner", "CASESTUDY_TEST_DIR="+f.dir, "CASESTUDY_TEST_RUN="+f.w.Dir)
	require.NoError(t, cmd.Start())
	trials := filepath.Join(f.w.Dir, "trials.jsonl")
	require.Eventually(t, func() bool {
		recs, _ := store.ReadTrials(trials)
		return len(recs) >= 1
	}, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	before, err := store.ReadTrials(trials)
	require.NoError(t, err)
	require.Less(t, len(before), 4, "killed mid-sweep")

	resumed := resume(t, f)
	ids := map[string]int{}
	for _, tr := range resumed.Trials {
		ids[tr.ID]++
		assert.Equal(t, store.OK, tr.Outcome, tr.Error)
	}
	for _, tr := range f.plan.Trials {
		assert.Equal(t, 1, ids[tr.ID], "trial %s exactly once", tr.ID)
	}
	assert.Len(t, ids, len(f.plan.Trials))
}

func TestOnlyTheNamedTrials(t *testing.T) {
	f := newFixture(t, faultsStudy)
	o := f.options()
	want := idOf(t, f.plan, "none")
	o.Only = []string{want}
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1, "no other trial, no skipped records")
	assert.Equal(t, want, run.Trials[0].ID)
	assert.Equal(t, store.OK, run.Trials[0].Outcome)
}

// TestStuckInsideTheEngineStillTimesOut: a rank stuck in a long engine call
// keeps beating (the heartbeat has its own goroutine), so only the trial
// deadline can end it.
func TestStuckInsideTheEngineStillTimesOut(t *testing.T) {
	f := newFixture(t, strings.Replace(faultsStudy, "timeout: 3s", "timeout: 2s", 1))
	for _, tr := range f.plan.Trials {
		if tr.Knobs["fault.kind"] == "slow" {
			tr.Knobs["fault.slow_ms"] = "60000"
			f.plan.Trials = []study.Trial{tr}
		}
	}
	f.plan.Dropped = nil
	o := f.options()
	o.HeartbeatLimit = 500 * time.Millisecond
	start := time.Now()
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	tr := run.Trials[0]
	assert.Equal(t, store.Timeout, tr.Outcome)
	assert.Contains(t, tr.Error, "exceeded its timeout of 2s", "the heartbeat kept the rank alive")
	assert.Less(t, time.Since(start), 15*time.Second)
}

// TestProfileAfterMeasuredSteps: with the profile knob every rank of every
// launch profiles after its measured steps: the record's steps are the
// measured ones only, each rank has its profile and a trace in the run
// directory; a launch whose engine cannot profile keeps its measurement and
// says why in the profile's error.
func TestProfileAfterMeasuredSteps(t *testing.T) {
	f := newFixture(t, `name: runner-profile
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 2, timeout: 10s}
baseline: {precision: fp32, profile: 2}
sweep: {strategy: list, trials: [{precision: fp32}, {precision: bf16}]}
`)
	run, err := f.run(t, context.Background(), f.options())
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		require.Len(t, tr.Repeats, 2)
		for _, rp := range tr.Repeats {
			for _, rk := range rp.Ranks {
				assert.Len(t, rk.Steps, 3, "profiled steps are not measured steps")
				require.NotNil(t, rk.Profile, "rank %d repeat %d", rk.Rank, rp.Repeat)
				if tr.Knobs["precision"] == "bf16" {
					assert.Contains(t, rk.Profile.Error, "no cs_profile")
					assert.False(t, rk.Profile.OK())
					continue
				}
				p := rk.Profile
				assert.True(t, p.OK(), p.Error)
				assert.Equal(t, 2, p.Steps)
				assert.InDelta(t, 0.75, p.Share("gemm/matmul"), 1e-9)
				assert.Equal(t, store.TraceName(tr.ID, rk.Rank, rp.Repeat), p.Trace)
				b, err := os.ReadFile(filepath.Join(f.w.Dir, p.Trace))
				require.NoError(t, err)
				assert.JSONEq(t, `{"traceEvents":[]}`, string(b))
			}
		}
	}
}

// TestRehearsalInterruptedHint: a rehearsal does not resume (run --rehearse
// refuses --resume), so its interrupted trials' records say a new rehearsal
// runs them again, not "--resume" (audit, 2026-12-07); a measured run's keep
// the resume hint.
func TestRehearsalInterruptedHint(t *testing.T) {
	for _, rehearse := range []bool{true, false} {
		f := newFixture(t, "name: hint\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\n")
		o := f.options()
		o.Machine.Rehearse = rehearse
		r, err := New(o)
		require.NoError(t, err)
		rec := &store.TrialRecord{ID: "t1", Outcome: store.Interrupted, FailedRank: -1, Error: "stopped by a signal; --resume runs it again"}
		require.NoError(t, r.commit(rec, &Result{Outcomes: map[store.Outcome]int{}}))
		if rehearse {
			assert.Equal(t, "stopped by a signal; a new rehearsal runs it again (a rehearsal does not resume)", rec.Error)
		} else {
			assert.Equal(t, "stopped by a signal; --resume runs it again", rec.Error)
		}
	}
}
