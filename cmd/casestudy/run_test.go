package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
)

// asMainEnv makes this test binary behave as the casestudy binary: `casestudy
// run` starts its workers as os.Executable() (here, the test binary) with
// "worker", so the end-to-end tests set it for the processes they spawn.
const asMainEnv = "CASESTUDY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" { // as main() does
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
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
func TestRunSmokeEndToEnd(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	out := t.TempDir()
	study := filepath.Join(repoRoot(t), "studies", "gpt", "smoke.yaml")
	code, stdout, stderr := runCLI(t, "run", study, "--out", out)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	dir := onlyRunDir(t, out)
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
	w, err := store.Create(filepath.Join(dir, "results"), "s", store.NewRunID(time.Now()))
	require.NoError(t, err)
	require.NoError(t, w.WriteManifest(&store.Manifest{Study: "s", StudyPath: good, StudySHA256: "0123456789abcdef"}))
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
