package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/checklist"
	"github.com/casestudy/casestudy/store"
)

// TestCheckOnSmokeRun: on a real run of studies/gpt/smoke.yaml on the CPU
// (smokeRun's, shared with TestRunSmokeEndToEnd: the same 9 launches ran here
// a second time before) every rule gives a verdict. Without the engine it
// fails under CI=true and is skipped (with the reason) elsewhere.
func TestCheckOnSmokeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains a tiny model")
	}
	_, dir, _ := smokeRun(t)

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
