package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/internal/syncbuf"
	"github.com/casestudy/casestudy/store"
)

// copyRun copies a crafted run directory of package report into a temporary
// folder (the readers' tests change it).
func copyRun(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(name))
	require.NoError(t, os.MkdirAll(dst, 0o755))
	for _, f := range []string{"manifest.json", "trials.jsonl"} {
		b, err := os.ReadFile(filepath.Join(fixture(name), f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, f), b, 0o644))
	}
	return dst
}

// TestRunStopsWhileReadingItsStudy (audit N14, G-15): `run` of a study on a
// FIFO nobody writes stops at SIGTERM, SIGINT and SIGHUP with 128 + the
// signal's number, as every other command does; it used to ignore them
// until its sweep started.
func TestRunStopsWhileReadingItsStudy(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "studies"), 0o755))
			fifo := filepath.Join(dir, "studies", "study.yaml")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			cmd, out := startMain(t, dir, "run", fifo, "--out", filepath.Join(dir, "results"))
			waitForReader(t, fifo, cmd, out)
			require.NoError(t, cmd.Process.Signal(tc.sig))
			assert.Equal(t, tc.code, exitStatus(t, cmd), out.String())
			assert.Contains(t, out.String(), "stopped by "+exitcode.SignalName(tc.sig))
		})
	}
}

// TestBaselineNeverOverwritesItsRun (audit N6, M-4): `baseline RUN -o
// RUN/trials.jsonl` (or manifest.json) is refused with exit status 2 and the
// run stays readable.
func TestBaselineNeverOverwritesItsRun(t *testing.T) {
	run := copyRun(t, "runs/bert-grid")
	for _, f := range []string{"trials.jsonl", "manifest.json"} {
		before, err := os.ReadFile(filepath.Join(run, f))
		require.NoError(t, err)
		code, _, stderr := runCLI(t, "baseline", run, "-o", filepath.Join(run, f))
		assert.Equal(t, exitcode.Input, code, stderr)
		assert.Contains(t, stderr, "refusing to overwrite")
		after, err := os.ReadFile(filepath.Join(run, f))
		require.NoError(t, err)
		assert.Equal(t, before, after)
	}
	code, _, stderr := runCLI(t, "status", run)
	assert.Equal(t, 0, code, stderr)
}

// TestCompareThresholdNaNIsRefused (audit N2, M-2): --threshold NaN or nan%
// would pass every regression; it is bad input, exit status 2.
func TestCompareThresholdNaNIsRefused(t *testing.T) {
	for _, v := range []string{"NaN", "nan%"} {
		code, _, stderr := runCLI(t, "compare", fixture("runs/bert-grid"), fixture("runs/bert-grid-slower"), "--threshold", v)
		assert.Equal(t, exitcode.Input, code, v+": "+stderr)
		assert.Contains(t, stderr, "--threshold")
	}
}

// TestReadersRefuseAFIFOAtOnce (audit N8, K-29/30): every reading command
// given a run whose manifest.json or trials.jsonl is a FIFO stops at once
// with exit status 2, naming the file, instead of blocking.
func TestReadersRefuseAFIFOAtOnce(t *testing.T) {
	for _, f := range []string{"manifest.json", "trials.jsonl"} {
		run := copyRun(t, "runs/bert-grid")
		p := filepath.Join(run, f)
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		for _, args := range [][]string{
			{"status", run}, {"report", run, "--out", t.TempDir()}, {"check", run}, {"timeline", run},
			{"export", run}, {"baseline", run, "-o", filepath.Join(t.TempDir(), "b.json")},
			{"compare", fixture("runs/bert-grid"), run},
		} {
			done := make(chan [3]any, 1)
			go func() {
				code, _, stderr := runCLI(t, args...)
				done <- [3]any{code, stderr}
			}()
			select {
			case r := <-done:
				assert.Equal(t, exitcode.Input, r[0], "%v: %s", args, r[1])
				assert.Contains(t, r[1], p, args)
			case <-time.After(20 * time.Second):
				t.Fatalf("%v blocked on the FIFO %s", args, p)
			}
		}
	}
}

// TestCheckRereadsRecordedSourcesFromAnywhere (audit N12, P-17): a run whose
// study extends a parent (every smoke study does) is checked from any folder
// with the study files gone: the manifest's sources hold the whole chain.
func TestCheckRereadsRecordedSourcesFromAnywhere(t *testing.T) {
	parent := checkStudy + "checklist:\n  thresholds:\n    precision: {min_speedup: 3}\n"
	child := "extends: ../parent.yaml\nname: crafted\n"
	dir := writeCheckRun(t, child)
	var m store.Manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	m.StudyPath = filepath.Join("studies", "gpt", "x.yaml")
	m.Sources = []store.StudySource{{Path: m.StudyPath, Text: child}, {Path: filepath.Join("studies", "parent.yaml"), Text: parent}}
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644))

	code, out, stderr := runCLI(t, "check", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "the study text in "+filepath.Join(dir, "manifest.json"))
}

// TestPipeGuardTurnsSIGPIPEIntoAStop (audit N11): a write to a pipe whose
// reader has gone fails with EPIPE instead of killing the process; the guard
// says so once and sends the rest to standard error.
func TestPipeGuardTurnsSIGPIPEIntoAStop(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	var errb bytes.Buffer
	g := guardPipe(w, &errb)
	require.NotNil(t, g)
	_, err = g.Write([]byte("first\n"))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = g.Write([]byte("resume with: x\n"))
	require.NoError(t, err)
	select {
	case <-g.broken:
	default:
		t.Fatal("the broken pipe was not noticed")
	}
	assert.Equal(t, "resume with: x\n", errb.String())
	assert.Nil(t, guardPipe(&errb, &errb), "not a file")
}

// TestRunIntoAClosedPipeIsInterrupted (audit N11, S-9): `casestudy run |
// head -1`: the reader goes after the first line; the run stops as after
// Ctrl-C (exit 141, the trial in flight recorded interrupted, the resume
// command on standard error) and --resume completes it.
func TestRunIntoAClosedPipeIsInterrupted(t *testing.T) {
	lib := engineLibOrSkip(t)
	out := t.TempDir()
	study := tinyStudy(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "run", "--out", out, study)
	cmd.Env = append(os.Environ(), asMainEnv+"=1", engine.EnvLibrary+"="+lib)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb syncbuf.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, errb.String())
	require.NotEmpty(t, line)
	require.NoError(t, stdout.Close())
	assert.Equal(t, 141, exitStatus(t, cmd), errb.String())
	assert.Contains(t, errb.String(), "resume with:")
	dir := onlyRunDir(t, out)
	t.Setenv(asMainEnv, "1") // the resume's workers are this binary as casestudy
	code, _, stderr := runCLI(t, "run", study, "--resume", dir, "--engine-lib", lib)
	require.Equal(t, 0, code, stderr)
	assertEveryTrialOnce(t, dir)
}

// TestTerminalOutputIsNeutralized (audit N18, A-8/A-9): an escape sequence
// planted in a run's knob value reaches no terminal through the reading
// commands, and a formula-like value is neutralised in CSV.
func TestTerminalOutputIsNeutralized(t *testing.T) {
	run := copyRun(t, "runs/bert-grid")
	payload := `@SUM(1)\u001b]0;PWNED\u0007\u001b[31m`
	for _, f := range []string{"manifest.json", "trials.jsonl"} {
		p := filepath.Join(run, f)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, bytes.ReplaceAll(b, []byte(`"fp16"`), []byte(`"`+payload+`"`)), 0o644))
	}
	for _, args := range [][]string{{"status", run}, {"timeline", run}, {"export", run, "--format", "csv"}, {"export", run},
		{"compare", fixture("runs/bert-grid"), run}, {"history", filepath.Dir(run)}} {
		code, stdout, stderr := runCLI(t, args...)
		// compare's gate may say inconclusive (4) on a copy it cannot judge;
		// what matters here is that nothing planted reaches the terminal.
		assert.Contains(t, []int{0, 1, 4}, code, "%v: %s", args, stderr)
		assert.NotContains(t, stdout, "\x1b", args)
		assert.NotContains(t, stdout, "\x07", args)
		assert.NotContains(t, stderr, "\x1b", args)
		if args[0] == "export" && len(args) > 2 {
			assert.Contains(t, stdout, `'@SUM(1)`, "a formula cell is neutralised")
		}
	}
}

// TestSubmitWithANewlineInOutLeavesNothing (audit N24): `run --submit` with
// a line break in --out is refused with exit status 2 and creates no
// folder (it used to leave an empty <run>.slurm behind).
func TestSubmitWithANewlineInOutLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	parent := t.TempDir()
	out := filepath.Join(parent, "res\nults")
	t.Setenv("SLURM_JOB_ID", "")
	code, _, stderr := runCLI(t, "run", path, "--launcher", "slurm", "--submit", "--out", out)
	assert.Equal(t, exitcode.Input, code, stderr)
	left, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing created")
}

// TestDamagedEngineLibraryIsAnEnvironmentError (audit N15, E-6..E-8): a
// library that kills the process loading it (here a truncated copy of a
// real one, or a file of garbage) is probed in a child process: the runner
// gets a one-line error naming the library, exit status 3, and lives.
func TestDamagedEngineLibraryIsAnEnvironmentError(t *testing.T) {
	t.Setenv(asMainEnv, "1")
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "libgarbage.so")
	require.NoError(t, os.WriteFile(garbage, bytes.Repeat([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}, 4096), 0o644))
	libs := []string{garbage}
	if lib, err := engine.Discover(""); err == nil {
		b, err := os.ReadFile(lib)
		require.NoError(t, err)
		cut := filepath.Join(dir, "libtruncated.so")
		require.NoError(t, os.WriteFile(cut, b[:min(len(b), 800<<10)], 0o644))
		libs = append(libs, cut)
	}
	for _, lib := range libs {
		_, _, err := probeEngineIn(exe, os.Environ(), lib)
		require.Error(t, err, lib)
		assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
		assert.Contains(t, err.Error(), lib)
		assert.NotContains(t, err.Error(), "\n", "one line")
	}
}

// TestEngineProbeThatDiesBySignal: the probe's child killed by a signal
// (SIGBUS in dlopen of a truncated file) is reported as that crash, in one
// line, exit status 3.
func TestEngineProbeThatDiesBySignal(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcasestudy_engine.so")
	require.NoError(t, os.WriteFile(lib, []byte("x"), 0o644))
	fake := filepath.Join(dir, "casestudy")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\nkill -BUS $$\n"), 0o755))
	_, _, err := probeEngineIn(fake, os.Environ(), lib)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
	assert.Contains(t, err.Error(), "crashed the process (SIGBUS)")
	assert.Contains(t, err.Error(), lib)
}

// fullWriter is standard output on a full device.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestLostStdoutIsEnvironment (audit N19, S-8): every command whose output
// cannot be written (`> /dev/full`) exits 3 and says so on standard error,
// whatever it would have exited otherwise.
func TestLostStdoutIsEnvironment(t *testing.T) {
	run := fixture("runs/bert-grid")
	for _, args := range [][]string{{"status", run}, {"status", run, "--json"}, {"timeline", run}, {"export", run},
		{"compare", run, run}, {"knobs"}, {"validate", filepath.Join("..", "..", "studies", "gpt", "smoke.yaml")}} {
		var errb bytes.Buffer
		code := execute(context.Background(), args, fullWriter{}, &errb)
		assert.Equal(t, exitcode.Environment, code, "%v: %s", args, errb.String())
		assert.Contains(t, errb.String(), "writing standard output", args)
	}
}

// TestCheckIgnoresAFIFOStudyPath (audit N8, A-11/K-31): a manifest whose
// study_path names a FIFO does not block check: it reads only a regular
// file there, else the study text the manifest holds.
func TestCheckIgnoresAFIFOStudyPath(t *testing.T) {
	dir := writeCheckRun(t, checkStudy)
	fifo := filepath.Join(t.TempDir(), "study.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	var m store.Manifest
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &m))
	m.StudyPath = fifo
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644))
	done := make(chan int, 1)
	go func() { code, _, _ := runCLI(t, "check", dir); done <- code }()
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(20 * time.Second):
		t.Fatal("check blocked on the FIFO study path")
	}
}

// TestResumeFindsItsStudyAndOut (audit D18 residue, N21): a resume without
// STUDY from another folder finds the relative study path from the run's
// output root, and resumed trials' commands carry that root as --out.
func TestResumeFindsItsStudyAndOut(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "studies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "studies", "s.yaml"), []byte("name: s\n"), 0o644))
	runDir := filepath.Join(root, "results", "s", "r1")
	require.NoError(t, os.MkdirAll(runDir, 0o755))
	run := &store.Run{Dir: runDir, Manifest: store.Manifest{StudyPath: filepath.Join("studies", "s.yaml")}}
	t.Chdir(t.TempDir())
	got := resumeStudyPath(run)
	b, err := os.ReadFile(got)
	require.NoError(t, err, got)
	assert.Equal(t, "name: s\n", string(b))
	assert.Equal(t, filepath.Join(root, "results"), resumedOut(runDir))
}

// waitForReader returns once cmd opened fifo to read (opening it for writing
// returns then; it is closed at the test's end); cmd then waits for data that
// never comes.
func waitForReader(t *testing.T, fifo string, cmd *exec.Cmd, out *syncbuf.Buffer) {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			opened <- f
		}
	}()
	select {
	case f := <-opened:
		t.Cleanup(func() { f.Close() })
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("%v never opened the FIFO: %s", cmd.Args, out.String())
	}
}

// TestRunRefusesAnEmptyOut (audit P-6 note): `--out ""` would write run
// directories into the current folder; it is bad input, exit 2.
func TestRunRefusesAnEmptyOut(t *testing.T) {
	code, _, stderr := runCLI(t, "run", filepath.Join("..", "..", "studies", "gpt", "smoke.yaml"), "--out", "")
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, `--out ""`)
}
