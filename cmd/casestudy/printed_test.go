package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// shell runs a printed command line as a user would paste it, from dir.
func shell(t *testing.T, dir, line string) (int, string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err, "%s", out)
	return 0, string(out)
}

// outsideStudy is a study that extends a file outside its studies tree, so
// it loads only with --allow-outside: five short trials of the tiny GPT.
func outsideStudy(t *testing.T, root string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "shared"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "studies"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "shared", "base.yaml"), []byte(`name: base
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 3, timeout: 1m, threads: 1}
compare: {baseline: tiny.baseline.json}
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "studies", "tiny.yaml"), []byte(`name: tiny
extends: ../shared/base.yaml
sweep:
  strategy: list
  trials: [{precision: fp32}, {precision: bf16}, {grad_accum: 2}, {micro_batch: 4}, {micro_batch: 1}]
`), 0o644))
	return filepath.Join("studies", "tiny.yaml")
}

// TestPrintedCommandsRunAsPrinted: a run started from one folder with
// relative paths and --allow-outside is stopped by SIGHUP (a closed
// terminal): it records the trial in flight as interrupted, exits 129 and
// prints a resume command that works as printed from another folder; so
// does the command recorded to re-run a trial (issue 21, defects 18 and 19).
func TestPrintedCommandsRunAsPrinted(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(engine.EnvLibrary, lib)
	root := t.TempDir()
	studyRel := outsideStudy(t, root)
	elsewhere := t.TempDir()

	cmd, out := startMain(t, root, "run", studyRel, "--allow-outside", "--out", "results", "--steps", "2")
	var dir string
	require.Eventually(t, func() bool {
		found, _ := filepath.Glob(filepath.Join(root, "results", "tiny", "*", "trials.jsonl"))
		if len(found) == 0 {
			return false
		}
		recs, _ := store.ReadTrials(found[0])
		dir = filepath.Dir(found[0])
		// Signal only once the second launch has started: between trials
		// nothing is in flight and nothing is recorded as interrupted.
		return len(recs) >= 1 && strings.Contains(out.String(), "launch 2/5")
	}, 2*time.Minute, 10*time.Millisecond, "no trial committed: %s", out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Equal(t, 129, exitStatus(t, cmd), out.String())
	t.Logf("stopped run:\n%s", out)

	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	last := run.Trials[len(run.Trials)-1]
	assert.Equal(t, store.Interrupted, last.Outcome, "the trial in flight is recorded")
	m := regexp.MustCompile(`(?m)^resume with: (.+)$`).FindStringSubmatch(out.String())
	require.NotNil(t, m, "a resume command is printed:\n%s", out)
	assert.Contains(t, m[1], "--allow-outside")
	assert.NotContains(t, m[1], "--steps", "--resume applies the recorded overrides itself")

	code, resumed := shell(t, elsewhere, m[1])
	require.Equal(t, 0, code, "%s\n%s", m[1], resumed)
	assertEveryTrialOnce(t, dir)
	check := regexp.MustCompile(`(?m)^checklist: (.+)$`).FindStringSubmatch(resumed)
	require.NotNil(t, check, "the finished run prints its checklist command:\n%s", resumed)
	code, checked := shell(t, elsewhere, check[1])
	require.Equal(t, 0, code, "%s\n%s", check[1], checked)
	assert.Contains(t, checked, "checklist of ")
	// the gate against the study's compare.baseline, set in the extended
	// file, relative to it, printed absolute
	assert.Regexp(t, `(?m)^gate: +\S+ compare \S+ \(against `+regexp.QuoteMeta(filepath.Join(root, "shared", "tiny.baseline.json"))+`\)$`, resumed)

	run, err = store.ReadRun(dir)
	require.NoError(t, err)
	rerun := run.Trials[0]
	require.NotEmpty(t, rerun.Command)
	for _, tr := range run.Trials {
		assert.Contains(t, tr.Command, "--steps=2", "the run's workload overrides, the resumed part's too: %s", tr.Command)
	}
	code, again := shell(t, elsewhere, rerun.Command)
	require.Equal(t, 0, code, "%s\n%s", rerun.Command, again)
	dirs, _ := filepath.Glob(filepath.Join(root, "results", "tiny", "*"))
	require.Len(t, dirs, 2, "the re-run writes where the run did (--out made absolute): %s", again)
	for _, d := range dirs {
		if d == dir {
			continue
		}
		recs, err := store.ReadTrials(filepath.Join(d, "trials.jsonl"))
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, rerun.ID, recs[0].ID)
		assert.Equal(t, store.OK, recs[0].Outcome, recs[0].Error)
		assert.Len(t, recs[0].Repeats[0].Ranks[0].Steps, 2, "the re-run measured with --steps 2 as the run did")
	}
	assert.False(t, strings.Contains(again, "not a trial of this plan"))
}
