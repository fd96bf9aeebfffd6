package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
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
