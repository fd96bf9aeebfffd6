package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// asMainEnv makes this test binary behave as the casestudy binary: `casestudy
// run` starts its workers as os.Executable() (here, the test binary) with
// "worker", so the end-to-end tests set it for the processes they spawn.
const asMainEnv = "CASESTUDY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" { // as main() does
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	removeSmokeRun() // smoke_shared_test.go
	os.Exit(code)
}

// engineLibOrSkip finds the built engine library; without it the test fails
// under CI=true and is skipped otherwise.
func engineLibOrSkip(t *testing.T) string {
	t.Helper()
	path, err := engine.Discover("")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the engine library is missing: %v", err)
		}
		t.Skipf("engine library not built (make engine): %v", err)
	}
	return path
}

// repoDir is the repository root, taken when the tests start in cmd/casestudy
// (before any test changes directory).
var repoDir, repoDirErr = filepath.Abs("../..")

func repoRoot(t *testing.T) string {
	t.Helper()
	require.NoError(t, repoDirErr)
	return repoDir
}

func onlyRunDir(t *testing.T, out string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "*", "*"))
	require.Len(t, dirs, 1, "one run directory under %s", out)
	return dirs[0]
}

// TestRunSmokeEndToEnd runs studies/gpt/smoke.yaml through the real engine:
// several trials, each in fresh worker processes, recorded with provenance.
// The run is smokeRun's, shared with TestCheckOnSmokeRun.
func TestRunSmokeEndToEnd(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
	out, dir, stdout := smokeRun(t)
	assert.Contains(t, stdout, "results: "+dir)

	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion, run.Manifest.Schema)
	assert.NotEmpty(t, run.Manifest.StudySHA256)
	require.NotNil(t, run.Manifest.Engine)
	assert.NotEmpty(t, run.Manifest.Engine.Torch)
	assert.NotEmpty(t, run.Manifest.Host.CPU)
	ok := 0
	for _, tr := range run.Trials {
		if tr.Outcome != store.OK {
			continue
		}
		ok++
		require.NotNil(t, tr.Summary, tr.ID)
		assert.Positive(t, tr.Summary.SamplesPerS)
		assert.Positive(t, tr.Summary.StepMSMedian)
		require.NotEmpty(t, tr.Repeats)
		r0 := tr.Repeats[0].Ranks[0]
		require.NotNil(t, r0.Info)
		assert.Equal(t, "cpu", r0.Info.Device)
		assert.NotEmpty(t, r0.Steps)
		assert.NotNil(t, r0.Checksum)
		_, err := os.Stat(filepath.Join(dir, store.LogName(tr.ID, 0, 0)))
		assert.NoError(t, err)
	}
	assert.GreaterOrEqual(t, ok, 2, "at least two trials ran through the engine: %+v", outcomes(run))
	sameNumberEverywhere(t, dir, stdout)
	checkTimelines(t, run)
	tutorialGate(t, dir)

	// The run is history now: plan estimates from it, status and timeline read it.
	code, stdout, stderr := runCLI(t, "plan", study, "--out", out)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `estimate: \S+ for 9 launches, \d+% of it measured steps`, stdout)
	assert.Contains(t, stdout, "earlier runs: "+dir)
	code, stdout, stderr = runCLI(t, "status", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "launches: 9 of 9 started, elapsed ")
	code, stdout, stderr = runCLI(t, "timeline", dir)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `9 launches took \S+( m?s)? of wall time; their measured steps \S+( m?s)?: \d+% of it`, stdout)
	assert.Contains(t, stdout, "engine_load")
}

// sameNumberEverywhere: one number per trial, one estimator: the terminal's
// progress line and end-of-run summary, the report and compare print the
// same value for the same trial.
func sameNumberEverywhere(t *testing.T, dir, stdout string) {
	t.Helper()
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	sum := report.Build(run, nil)
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	code, cmpOut, cmpErr := runCLI(t, "compare", dir, dir, "--json", "--inconclusive=pass")
	require.Equal(t, 0, code, cmpErr)
	var cmp struct {
		Rows []struct {
			ID  string
			New *struct{ Center float64 }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(cmpOut), &cmp))
	compared := map[string]float64{}
	for _, r := range cmp.Rows {
		if r.New != nil {
			compared[r.ID] = r.New.Center
		}
	}
	lines := strings.Split(stdout, "\n")
	checked := 0
	for _, tr := range sum.Trials {
		if !tr.OK() {
			continue
		}
		want := report.Num(tr.Value.Center)
		onLine := func(text string, parts ...string) int {
			n := 0
			for _, l := range strings.Split(text, "\n") {
				all := true
				for _, p := range parts {
					all = all && strings.Contains(l, p)
				}
				if all {
					n++
				}
			}
			return n
		}
		assert.GreaterOrEqual(t, onLine(strings.Join(lines, "\n"), tr.ID, want+" "+sum.Metric.Unit), 1,
			"the progress line of %s says %s %s:\n%s", tr.ID, want, sum.Metric.Unit, stdout)
		assert.GreaterOrEqual(t, onLine(stdout, tr.ID, " "+want+" "), 2, "progress and end-of-run summary of %s", tr.ID)
		assert.Equal(t, 1, onLine(string(md), "| "+tr.ID, "| "+want+" |"), "report.md row of %s", tr.ID)
		assert.Equal(t, want, report.Num(compared[tr.ID]), "compare's value of %s", tr.ID)
		checked++
	}
	assert.GreaterOrEqual(t, checked, 2)
}

// checkTimelines: in a real smoke run every launch has a timeline whose
// phases are in launch order, none negative, adding up to the launch's wall
// time; one launch starts where the previous one ended, or (prepared ahead
// by the default --overlap tail) after the previous one's steps and before
// its end; the rank's measured phase holds its measured steps' own time.
func checkTimelines(t *testing.T, run *store.Run) {
	t.Helper()
	order := map[string]int{}
	for i, p := range timeline.Order {
		order[p] = i
	}
	var launches []*store.Timeline
	ahead := map[*store.Timeline]bool{}
	for _, tr := range run.Trials {
		if tr.Outcome != store.OK {
			continue
		}
		for _, rp := range tr.Repeats {
			tl := rp.Timeline
			require.NotNil(t, tl, "trial %s repeat %d has a timeline", tr.ID, rp.Repeat)
			launches = append(launches, tl)
			require.NotNil(t, rp.Overlap, "the default --overlap tail records how launches overlapped")
			assert.Equal(t, runner.OverlapTail, rp.Overlap.Mode)
			assert.Zero(t, rp.Overlap.InWindowMS, "no preparation inside a measured window")
			ahead[tl] = rp.Overlap.PreparedAhead
			sum, last := 0.0, -1
			for _, p := range tl.Phases {
				assert.GreaterOrEqual(t, p.MS, 0.0, p.Name)
				sum += p.MS
				i, known := order[p.Name]
				require.True(t, known || timeline.IsCreate(p.Name), "known phase %q", p.Name)
				if known {
					assert.Greater(t, i, last, "phases in launch order: %s", p.Name)
					last = i
				}
			}
			assert.InDelta(t, tl.WallMS(), sum, 0.01, "phases add up to the launch's wall time")
			assert.Positive(t, tl.PhaseMS(timeline.PhaseEngineLoad), "loading libtorch takes time")
			// the engine reports where cs_create spent its time: they replace engine_create
			require.NotNil(t, rp.Ranks[0].Info)
			require.NotEmpty(t, rp.Ranks[0].Info.InitPhases, "the engine's init_phases")
			assert.Zero(t, tl.PhaseMS(timeline.PhaseEngineCreate), "split into the engine's phases")
			for _, ph := range rp.Ranks[0].Info.InitPhases {
				assert.Contains(t, phaseNames(tl), timeline.CreatePrefix+ph.Name)
			}
			assert.Positive(t, tl.PhaseMS(timeline.CreatePrefix+"model_build"), "building the model takes time")
			r0 := rp.Ranks[0]
			stepMS := 0.0
			for _, s := range r0.Steps {
				stepMS += s.StepMS
			}
			require.NotNil(t, r0.Timeline)
			assert.GreaterOrEqual(t, r0.Timeline.PhaseMS(timeline.PhaseMeasured)+0.5, stepMS)
			assert.Len(t, r0.WarmupStepMS, r0.WarmupSteps)
			assert.NotNil(t, rp.SettleStep)
		}
	}
	require.NotEmpty(t, launches)
	// in the order they ran (interleaved rounds commit trials out of it)
	slices.SortFunc(launches, func(a, b *store.Timeline) int { return a.Start.Compare(b.Start) })
	prepared := 0
	for i := 1; i < len(launches); i++ {
		prev, l := launches[i-1], launches[i]
		if !ahead[l] {
			assert.Equal(t, prev.End, l.Start, "launch %d starts where launch %d ended", i, i-1)
			continue
		}
		// prepared ahead (--overlap tail): after its predecessor's steps, before its end
		stepsEnd := prev.Start
		for _, p := range prev.Phases {
			stepsEnd = stepsEnd.Add(time.Duration(p.MS * float64(time.Millisecond)))
			if p.Name == timeline.PhaseMeasured {
				break
			}
		}
		assert.False(t, l.Start.Before(stepsEnd.Add(-5*time.Millisecond)), "launch %d prepared before launch %d's steps ended", i, i-1)
		assert.True(t, l.Start.Before(prev.End), "launch %d prepared while launch %d ended", i, i-1)
		prepared++
	}
	assert.Positive(t, prepared, "the default --overlap tail prepared launches ahead")
}

func phaseNames(tl *store.Timeline) []string {
	var out []string
	for _, p := range tl.Phases {
		out = append(out, p.Name)
	}
	return out
}

func outcomes(run *store.Run) map[string]string {
	m := map[string]string{}
	for _, tr := range run.Trials {
		m[tr.ID] = string(tr.Outcome) + " " + tr.Error
	}
	return m
}

// TestRunEngineFaults runs a tiny study through the real engine where one
// trial hangs (killed at its deadline, recorded timeout) and the next still runs.
func TestRunEngineFaults(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	dir := t.TempDir()
	path := filepath.Join(dir, "studies", "faults.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`name: engine-faults
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 2, timeout: 20s}
sweep:
  strategy: list
  trials:
    - {fault.kind: hang, fault.at_step: 1}
    - {fault.kind: crash, fault.at_step: 1}
    - {fault.kind: none}
`), 0o644))
	out := filepath.Join(dir, "results")
	code, stdout, stderr := runCLI(t, "run", path, "--out", out, "--heartbeat-timeout", "3s", "--kill-grace", "500ms", "--json")
	require.Equal(t, exitcode.Failure, code, "a trial timed out and one crashed: exit status 1\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "2 trial(s) failed, crashed or timed out", "with --json the words go to standard error")
	var sum struct {
		Status   string         `json:"status"`
		ExitCode int            `json:"exit_code"`
		Outcomes map[string]int `json:"outcomes"`
		Failed   []string       `json:"failed"`
		Reports  []string       `json:"reports"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &sum), "standard output is the JSON summary alone:\n%s", stdout)
	assert.Equal(t, "complete", sum.Status)
	assert.Equal(t, exitcode.Failure, sum.ExitCode)
	assert.Equal(t, map[string]int{"ok": 1, "timeout": 1, "crashed": 1}, sum.Outcomes)
	assert.Len(t, sum.Failed, 2)
	assert.NotEmpty(t, sum.Reports)
	run, err := store.ReadRun(onlyRunDir(t, out))
	require.NoError(t, err)
	got := map[string]store.TrialRecord{}
	for _, tr := range run.Trials {
		got[tr.Knobs["fault.kind"]] = tr
	}
	assert.Equal(t, store.Timeout, got["hang"].Outcome, got["hang"].Error)
	assert.Equal(t, store.Crashed, got["crash"].Outcome)
	assert.Equal(t, "SIGKILL", got["crash"].Signal)
	assert.Equal(t, store.OK, got["none"].Outcome, got["none"].Error)
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	studies := filepath.Join(dir, "studies")
	require.NoError(t, os.MkdirAll(studies, 0o755))
	good := filepath.Join(studies, "s.yaml")
	text := "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"
	require.NoError(t, os.WriteFile(good, []byte(text), 0o644))
	badChecklist := filepath.Join(studies, "checklist.yaml")
	require.NoError(t, os.WriteFile(badChecklist, []byte(text+"checklist: {disable: [no-such-rule]}\n"), 0o644))

	// a run directory made from another version of the study
	w, err := store.Create(filepath.Join(dir, "results"), "s", store.NewRunID(time.Now()),
		&store.Manifest{Study: "s", StudyPath: good, StudySHA256: "0123456789abcdef"})
	require.NoError(t, err)
	w.Close()

	for _, tc := range []struct {
		desc   string
		args   []string
		code   int
		stderr string
	}{
		{"no study", []string{"run"}, exitcode.Input, "needs a study file or --resume"},
		{"missing study", []string{"run", filepath.Join(studies, "none.yaml")}, exitcode.Input, "none.yaml"},
		{"unknown trial", []string{"run", good, "--trial", "nope"}, exitcode.Input, "--trial nope: not a trial of this plan"},
		{"resume of no run", []string{"run", "--resume", filepath.Join(dir, "nothing")}, exitcode.Input, "is not a run directory"},
		{"resume of a changed study", []string{"run", "--resume", w.Dir}, exitcode.Input, "changed since"},
		{"unknown checklist rule", []string{"run", badChecklist, "--out", filepath.Join(dir, "out")}, exitcode.Input,
			`checklist.disable: unknown rule "no-such-rule"`},
		{"missing engine", []string{"run", good, "--engine-lib", filepath.Join(dir, "none.so"), "--out", filepath.Join(dir, "out")},
			exitcode.Environment, "none.so"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
	_, err = os.Stat(filepath.Join(dir, "out"))
	assert.True(t, os.IsNotExist(err), "a failed preflight writes nothing")
}

func TestDoctorWithoutEngine(t *testing.T) {
	code, stdout, _ := runCLI(t, "doctor", "--engine-lib", filepath.Join(t.TempDir(), "none.so"), "--out", t.TempDir())
	assert.Equal(t, exitcode.Environment, code)
	assert.Contains(t, stdout, "MISS  engine")
	assert.Contains(t, stdout, "fix: build it with `make engine`")
	assert.Contains(t, stdout, "ok    disk")
	assert.Contains(t, stdout, "not usable yet")
}

func TestDoctorWithEngine(t *testing.T) {
	lib := engineLibOrSkip(t)
	code, stdout, _ := runCLI(t, "doctor", "--engine-lib", lib, "--out", t.TempDir())
	assert.Equal(t, 0, code, stdout)
	assert.Contains(t, stdout, "ok    abi")
	assert.True(t, strings.Contains(stdout, "usable for CPU studies") || strings.Contains(stdout, "usable for CPU and GPU studies"), stdout)
}

// startRun starts this test binary as `casestudy run ARGS...` in its own
// process and waits until at least one trial is committed under out.
func startRun(t *testing.T, lib, out string, args ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	var buf bytes.Buffer
	cmd := exec.Command(exe, append([]string{"run", "--out", out}, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", engine.EnvLibrary+"="+lib)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	require.NoError(t, cmd.Start())
	var dir string
	require.Eventually(t, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(out, "*", "*", "trials.jsonl"))
		if len(dirs) == 0 {
			return false
		}
		recs, _ := store.ReadTrials(dirs[0])
		dir = filepath.Dir(dirs[0])
		return len(recs) >= 1
	}, 60*time.Second, 10*time.Millisecond, "no trial committed")
	return cmd, &buf, dir
}

// tinyStudy is three short trials of the tiny GPT for the kill and interrupt tests.
func tinyStudy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studies", "tiny.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`name: tiny
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 3, timeout: 1m, threads: 1}
sweep: {strategy: list, trials: [{precision: fp32}, {precision: bf16}, {grad_accum: 2}]}
`), 0o644))
	return path
}

func assertEveryTrialOnce(t *testing.T, dir string) {
	t.Helper()
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, tr := range run.Trials {
		seen[tr.ID]++
		assert.Equal(t, store.OK, tr.Outcome, "%s: %s", tr.ID, tr.Error)
	}
	for _, p := range run.Manifest.Plan {
		assert.Equal(t, 1, seen[p.ID], "trial %s exactly once", p.ID)
	}
	assert.Len(t, seen, len(run.Manifest.Plan))
}

// TestRunKilledThenResumed: kill -9 of the casestudy process mid-sweep loses
// at most the trial in flight; --resume completes the run, no duplicate, no
// lost trial.
func TestRunKilledThenResumed(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	out := t.TempDir()
	cmd, _, dir := startRun(t, lib, out, tinyStudy(t))
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	code, stdout, stderr := runCLI(t, "run", "--resume", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertEveryTrialOnce(t, dir)
}

// TestRunInterruptedThenResumed: Ctrl-C records the trial in flight as
// interrupted, prints the resume command and exits 130.
func TestRunInterruptedThenResumed(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	out := t.TempDir()
	cmd, buf, dir := startRun(t, lib, out, tinyStudy(t))
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, cmd.Process.Signal(os.Interrupt), "a second Ctrl-C is ignored while flushing")
	err := cmd.Wait()
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, buf.String())
	t.Logf("interrupted run (exit %d):\n%s", exitErr.ExitCode(), buf)
	if exitErr.ExitCode() == exitcode.Interrupted {
		assert.Contains(t, buf.String(), "resume with: ")
		assert.Contains(t, buf.String(), " --resume "+dir)
	} else {
		// the signal came after the last trial had started: it still ends cleanly
		require.Equal(t, 0, exitErr.ExitCode(), buf.String())
	}
	code, stdout, stderr := runCLI(t, "run", "--resume", dir)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assertEveryTrialOnce(t, dir)
}
