package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/store"
)

// TestCheckOnSmokeRun runs studies/gpt/smoke.yaml for real on the CPU with
// bin/casestudy and the engine, then checks that every rule gives a verdict on
// the run. Without the binary, the engine or the study it fails under CI=true
// and is skipped (with the reason) elsewhere.
func TestCheckOnSmokeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains a tiny model")
	}
	repo := repoRoot(t)
	bin := filepath.Join(repo, "bin", "casestudy")
	studyPath := filepath.Join(repo, "studies", "gpt", "smoke.yaml")
	missing := func(what string, err error) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s: %v", what, err)
		}
		t.Skipf("%s (run `make cli engine`): %v", what, err)
	}
	if _, err := os.Stat(bin); err != nil {
		missing("no bin/casestudy", err)
	}
	if _, err := os.Stat(studyPath); err != nil {
		missing("no studies/gpt/smoke.yaml", err)
	}
	lib := engineLibOrSkip(t)

	out := t.TempDir()
	cmd := exec.Command(bin, "run", studyPath, "--out", out, "--engine-lib", lib)
	cmd.Dir = repo
	logs, err := cmd.CombinedOutput()
	require.NoError(t, err, "casestudy run:\n%s", logs)
	manifests, err := filepath.Glob(filepath.Join(out, "*", "*", "manifest.json"))
	require.NoError(t, err)
	require.Len(t, manifests, 1, "one run directory under %s", out)
	dir := filepath.Dir(manifests[0])

	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	require.NotEmpty(t, run.Trials)

	code, stdout, stderr := runCLI(t, "check", dir, "--json")
	require.Equal(t, 0, code, stderr)
	var rep checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Len(t, rep.Results, len(checklist.Rules()))
	for i, r := range rep.Results {
		assert.Equal(t, checklist.Rules()[i].ID, r.RuleID)
		assert.Contains(t, []checklist.Status{checklist.Pass, checklist.Finding, checklist.NotApplicable}, r.Status, r.RuleID)
		assert.NotEmpty(t, r.Message, r.RuleID)
		if r.Status == checklist.Finding {
			assert.NotEmpty(t, r.Recommendation, r.RuleID)
		}
	}
	byID := map[string]checklist.Result{}
	for _, r := range rep.Results {
		byID[r.RuleID] = r
	}
	// A CPU run has no GPU topology or link: those rules must say so rather than guess.
	if run.Manifest.Host.TopoMatrix == "" {
		assert.Equal(t, checklist.NotApplicable, byID["topology"].Status)
	}
	assert.Equal(t, checklist.NotApplicable, byID["busbw-vs-link"].Status, byID["busbw-vs-link"].Message)
	// The smoke study is one-at-a-time around a baseline: with the baseline and
	// another trial ok, the real records form clean pairs.
	ok, baselineOK := 0, false
	for _, tr := range run.Trials {
		if tr.Outcome == store.OK {
			ok++
			baselineOK = baselineOK || len(tr.Changed) == 0
		}
	}
	if ok >= 2 && baselineOK {
		assert.NotEqual(t, checklist.NotApplicable, byID["no-effect-knob"].Status, byID["no-effect-knob"].Message)
	}
	code, text, stderr := runCLI(t, "check", dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, text, "checklist of "+dir)
}
