package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

// tutorialGate is docs/tutorial.md's nightly gate, as written, on a real
// CPU run of studies/gpt/smoke.yaml (TestRunSmokeEndToEnd): the run becomes
// the baseline file (no warning: three launches a trial), and a copy with
// every launch 0.67x as fast never passes the gate: it exits 1 (a
// regression) or 4 (inconclusive), never 0.
func tutorialGate(t *testing.T, dir string) {
	t.Helper()
	base := filepath.Join(t.TempDir(), "smoke.baseline.json")
	code, _, stderr := runCLI(t, "baseline", dir, "-o", base)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "fewer than 3 launches")

	slow := scaledRunCopy(t, dir, 0.67)
	md := filepath.Join(t.TempDir(), "compare.md")
	code, _, stderr = runCLI(t, "compare", base, slow, "--format", "md", "-o", md)
	assert.NotEqual(t, 0, code, "a 33%% slower night must not pass the gate: %s", stderr)
	assert.Contains(t, []int{exitcode.Failure, exitcode.Inconclusive}, code, stderr)
	out, err := os.ReadFile(md)
	require.NoError(t, err)
	assert.Regexp(t, `\*\*(REGRESSION|INCONCLUSIVE): `, string(out))

	code, stdout, stderr := runCLI(t, "compare", base, slow, "--json", "--inconclusive=pass")
	var c report.Comparison
	require.NoError(t, json.Unmarshal([]byte(stdout), &c), stderr)
	assert.NotEqual(t, "pass", c.Gate, c.Verdict)
	if code == 0 {
		assert.Equal(t, "inconclusive", c.Gate, "--inconclusive=pass maps only an inconclusive gate to 0")
	}
}

// scaledRunCopy copies a run directory's manifest and trials with every
// launch's throughput multiplied by f and its step times divided by f.
func scaledRunCopy(t *testing.T, dir string, f float64) string {
	t.Helper()
	return editedRun(t, dir, func(r *store.TrialRecord) *store.TrialRecord {
		for i := range r.Repeats {
			rp := &r.Repeats[i]
			rp.SamplesPerS *= f
			rp.TokensPerS *= f
			for k := range rp.Ranks {
				for s := range rp.Ranks[k].Steps {
					rp.Ranks[k].Steps[s].StepMS /= f
				}
			}
		}
		r.Summary = nil // summarised again from the scaled launches
		return r
	})
}

// TestTutorialGateSteps: the same steps on a recorded run (no engine
// needed), so the gate's wiring is tested wherever the engine is not built.
func TestTutorialGateSteps(t *testing.T) {
	tutorialGate(t, fixture("runs/bert-grid"))
}
