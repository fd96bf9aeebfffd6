package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// TestChecklistProblemsNamePlace: unknown rules and thresholds under
// checklist.* are named with file:line:col (issue 21, defect 16).
func TestChecklistProblemsNamePlace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`name: c
model: {family: gpt, preset: tiny}
workload: {device: cpu, ranks: 1, steps: 1}
checklist:
  disable: [straggler, no-such-rule]
  thresholds:
    stragler: {spread: 0.1}
    straggler: {sprad: 0.1}
`), 0o644))
	code, _, stderr := runCLI(t, "validate", path)
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, path+`:5:24: checklist.disable: unknown rule "no-such-rule"`)
	assert.Contains(t, stderr, path+`:7:5: checklist.thresholds: unknown rule "stragler"`)
	assert.Contains(t, stderr, path+`:8:17: checklist.thresholds.straggler: unknown threshold "sprad"`)
}

// TestSubmitRefusesInjection: --partition and --account go into #SBATCH lines
// and are checked like the study's launcher settings: a line break is refused
// with exit status 2 before anything is written or submitted (issue 21, defect 1).
func TestSubmitRefusesInjection(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	marker := filepath.Join(t.TempDir(), "pwned")
	out := filepath.Join(t.TempDir(), "results")
	t.Setenv("SLURM_JOB_ID", "")
	for _, flag := range []string{"--partition", "--account"} {
		code, _, stderr := runCLI(t, "run", path, "--launcher", "slurm", "--submit", "--out", out, flag, "debug\ntouch "+marker)
		assert.Equal(t, exitcode.Input, code, stderr)
		assert.Contains(t, stderr, flag+`: "debug\ntouch `)
		assert.NoFileExists(t, marker)
		assert.NoDirExists(t, out, "nothing written")
	}
}

// TestHugeSweepStaysBoundedInMemory: a 10^12-point grid with --max-trials
// 10^12 (issue 21, defect 2) is refused with exit status 2 and the reason by
// plan, validate and run inside a 2 GiB address-space limit (a Go program
// needs about 1.5 GiB of it to start), and a plan at study.MaxTrialsCeiling
// fits in the same limit: the size is counted before anything is expanded and
// no limit above the ceiling is taken.
func TestHugeSweepStaysBoundedInMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	list := func(n int) string {
		values := make([]string, n)
		for i := range values {
			values[i] = strconv.Itoa(i + 1)
		}
		return "[" + strings.Join(values, ", ") + "]"
	}
	head := "model: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\nsweep:\n  strategy: grid\n  knobs:\n"
	huge := filepath.Join(dir, "huge.yaml")
	require.NoError(t, os.WriteFile(huge, []byte("name: huge\n"+head+"    micro_batch: "+list(1000)+"\n    grad_accum: "+list(1000)+
		"\n    seq_len: "+list(1000)+"\n    ddp.bucket_mb: "+list(1000)+"\n"), 0o644))
	atCeiling := filepath.Join(dir, "ceiling.yaml")
	require.NoError(t, os.WriteFile(atCeiling, []byte("name: ceiling\n"+head+"    micro_batch: "+list(100)+
		"\n    grad_accum: "+list(study.MaxTrialsCeiling/100)+"\n"), 0o644))
	exe, err := os.Executable()
	require.NoError(t, err)
	limited := func(args ...string) (int, string) {
		cmd := exec.Command("bash", append([]string{"-c", `ulimit -v 2097152 && exec "$0" "$@"`, exe}, args...)...)
		cmd.Env = append(os.Environ(), asMainEnv+"=1")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &ee, "%v", args)
			return ee.ExitCode(), stderr.String()
		}
		return 0, stderr.String()
	}
	for _, args := range [][]string{
		{"plan", huge, "--max-trials", "1000000000000"},
		{"validate", huge, "--max-trials", "1000000000000"},
		{"run", huge, "--max-trials", "1000000000000", "--out", t.TempDir()},
		{"plan", huge, "--max-trials", "-1"},
		{"plan", huge, "--max-trials", strconv.Itoa(study.MaxTrialsCeiling)},
	} {
		code, stderr := limited(args...)
		short := stderr[:min(len(stderr), 400)]
		assert.Equal(t, exitcode.Input, code, "%v: %s", args, short)
		assert.Contains(t, short, "max-trials", "%v", args)
		assert.NotContains(t, short, "out of memory", "%v", args)
	}
	code, stderr := limited("plan", atCeiling, "--max-trials", strconv.Itoa(study.MaxTrialsCeiling))
	assert.Equal(t, 0, code, "a plan at the ceiling fits: %s", stderr[:min(len(stderr), 400)])
}

// TestResumeChecksBeforeWriting: --resume of a run whose parent study was
// edited is refused with exit status 2 before anything in the run directory
// changes: the interrupted record and the torn last line are still there.
func TestResumeChecksBeforeWriting(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	base, child := filepath.Join(dir, "base.yaml"), filepath.Join(dir, "child.yaml")
	require.NoError(t, os.WriteFile(base, []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 1}\n"), 0o644))
	require.NoError(t, os.WriteFile(child, []byte("name: child\nextends: base.yaml\nsweep: {strategy: grid, knobs: {micro_batch: [1, 2]}}\n"), 0o644))
	s, err := study.Load(child, study.LoadOptions{})
	require.NoError(t, err)
	plan, err := study.Expand(s, study.ExpandOptions{})
	require.NoError(t, err)
	w, err := store.Create(filepath.Join(t.TempDir(), "results"), s.Name, "run1",
		runner.NewManifest("run1", s, plan, &runner.Machine{Device: "cpu"}, nil, nil, nil))
	require.NoError(t, err)
	require.NoError(t, w.Append(&store.TrialRecord{ID: plan.Trials[0].ID, Outcome: store.OK, FailedRank: -1}))
	require.NoError(t, w.Append(&store.TrialRecord{ID: plan.Trials[1].ID, Outcome: store.Interrupted, FailedRank: -1}))
	require.NoError(t, w.Close())
	trials := filepath.Join(w.Dir, "trials.jsonl")
	f, err := os.OpenFile(trials, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"schema":1,"id":"torn`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(trials)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(base, []byte("name: base\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, steps: 5}\n"), 0o644))
	code, _, stderr := runCLI(t, "run", "--resume", w.Dir)
	assert.Equal(t, exitcode.Input, code, stderr)
	assert.Contains(t, stderr, base+" (extended by "+child+") changed since "+w.Dir+" started")
	after, err := os.ReadFile(trials)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "trials.jsonl untouched")
}
