package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// studyCLI runs casestudy in-process from the repository root (so that
// studies/... paths work as in the README).
func studyCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(repoRoot(t))
	return runCLI(t, args...)
}

func TestValidateShippedStudies(t *testing.T) {
	code, stdout, stderr := studyCLI(t, "validate", "studies/**/*.yaml")
	assert.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	for _, f := range []string{"studies/gpt.yaml", "studies/bert/nccl.yaml", "studies/resnet50/smoke.yaml"} {
		assert.Contains(t, stdout, "ok  "+f+"  (")
	}
	// A directory argument means every study under it.
	code, dirOut, _ := studyCLI(t, "validate", "studies")
	assert.Equal(t, 0, code)
	assert.Equal(t, stdout, dirOut)
}

func TestValidateErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(good, []byte("name: g\nmodel: {family: gpt, preset: tiny}\n"), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte("name: b\nmodel: {family: gpt, preset: tiny}\nsweep:\n  strategy: grid\n  knobs:\n    bucket_mbs: [1, 5]\n    precision: [fp4]\n"), 0o644))

	code, stdout, stderr := studyCLI(t, "validate", good, bad)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stdout, "ok  "+good)
	assert.Contains(t, stderr, bad+`:6:5: unknown key "bucket_mbs" in sweep (did you mean "ddp.bucket_mb"?)`)
	assert.Contains(t, stderr, bad+`:7:17: precision: "fp4" is not one of fp32 | tf32 | bf16 | fp16 | fp8`)
	assert.Contains(t, stderr, "1 of 2 study files have problems")

	rules := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rules, []byte("name: r\nmodel: {family: gpt, preset: tiny}\nchecklist: {disable: [stragler]}\n"), 0o644))
	code, _, stderr = studyCLI(t, "validate", rules)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, rules+`:3:23: checklist.disable: unknown rule "stragler"`)

	code, _, stderr = studyCLI(t, "validate", filepath.Join(dir, "missing.yaml"))
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "missing.yaml: cannot read study: no such file or directory")

	code, _, stderr = studyCLI(t, "validate", filepath.Join(dir, "*.yml"))
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "no file matches this pattern")

	code, _, stderr = studyCLI(t, "validate")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "requires at least 1 arg")

	code, _, _ = studyCLI(t, "validate", "--max-trials", "0", good)
	assert.Equal(t, exitcode.Input, code)
}

func TestPlanTable(t *testing.T) {
	code, stdout, stderr := studyCLI(t, "plan", "studies/bert.yaml")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "study bert (studies/bert.yaml): bert large, device cuda, 1 rank")
	assert.Contains(t, stdout, "ID        #  CHANGED FROM BASELINE")
	assert.Regexp(t, `(?m)^[0-9a-f]{8}  0  \(baseline\)$`, stdout)
	assert.Regexp(t, `(?m)^[0-9a-f]{8}  1  precision=fp32$`, stdout)
	assert.Contains(t, stdout, "dropped:")
	assert.Contains(t, stdout, "nccl.algo=Ring needs more than one rank")
	assert.Regexp(t, `(?m)^\d+ trials, \d+ dropped \(\d+ combinations, limit 500\)$`, stdout)

	code, stdout, _ = studyCLI(t, "plan", "studies/gpt/greedy.yaml")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "strategy: greedy (round 1 of 4: precision)")
	assert.Contains(t, stdout, "later rounds depend on results: micro_batch (3 values), graphs (2 values), activation_checkpointing (2 values)")
}

func TestPlanJSON(t *testing.T) {
	code, stdout, stderr := studyCLI(t, "plan", "--json", "studies/gpt/pipeline.yaml")
	require.Equal(t, 0, code, stderr)
	var got struct {
		Study    string            `json:"study"`
		Strategy string            `json:"strategy"`
		Baseline map[string]string `json:"baseline"`
		Trials   []struct {
			ID      string            `json:"id"`
			Knobs   map[string]string `json:"knobs"`
			Changed []string          `json:"changed"`
		} `json:"trials"`
		Dropped []struct {
			Knobs  map[string]string `json:"knobs"`
			Reason string            `json:"reason"`
		} `json:"dropped"`
		Limit int `json:"limit"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got))
	assert.Equal(t, "gpt-pipeline", got.Study)
	assert.Equal(t, "grid", got.Strategy)
	assert.Equal(t, 500, got.Limit)
	require.NotEmpty(t, got.Trials)
	assert.Len(t, got.Trials[0].ID, 8)
	assert.Contains(t, got.Trials[0].Knobs, "pipeline.stages")
	require.NotEmpty(t, got.Dropped)
	assert.Contains(t, got.Dropped[0].Reason, "has no effect without pipeline stages")

	// The same plan twice: the same IDs.
	_, again, _ := studyCLI(t, "plan", "--json", "studies/gpt/pipeline.yaml")
	assert.Equal(t, stdout, again)
}

func TestPlanErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("name: big\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\n"+
		"sweep: {strategy: grid, knobs: {grad_accum: [1, 2, 3, 4, 5, 6], micro_batch: [1, 2, 3, 4, 5, 6]}}\n"), 0o644))
	code, stdout, stderr := studyCLI(t, "plan", "--max-trials", "20", big)
	assert.Equal(t, exitcode.Input, code)
	assert.Empty(t, stdout, "nothing is printed for a refused plan")
	assert.Contains(t, stderr, "sweep expands to 6x6 = more than 20 trials, above the limit of 20 (raise the limit with --max-trials")
	code, stdout, _ = studyCLI(t, "plan", "--max-trials", "36", big)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "36 trials, 0 dropped")

	outside := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(outside, []byte("name: p\nmodel: {family: gpt, preset: tiny}\n"), 0o644))
	child := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(child, []byte("name: c\nextends: "+outside+"\n"), 0o644))
	code, _, stderr = studyCLI(t, "plan", child)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "outside the studies tree")
	code, _, _ = studyCLI(t, "plan", "--allow-outside", child)
	assert.Equal(t, 0, code)

	code, _, stderr = studyCLI(t, "plan", "a.yaml", "b.yaml")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "accepts 1 arg")
}

func TestKnobsCommand(t *testing.T) {
	code, stdout, _ := studyCLI(t, "knobs")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^nccl\.algo\s+enum\s+auto\s+env NCCL_ALGO\s+6$`, stdout)
	assert.NotContains(t, stdout, "fault.kind")
	_, all, _ := studyCLI(t, "knobs", "--all")
	assert.Contains(t, all, "fault.kind")

	code, stdout, _ = studyCLI(t, "knobs", "ddp.bucket_mb")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "ddp.bucket_mb (float)")
	assert.Contains(t, stdout, "course:      chapter 16, latency hiding (docs/course.md)")

	code, stdout, _ = studyCLI(t, "knobs", "--json", "precision")
	require.Equal(t, 0, code)
	var k map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &k))
	assert.Equal(t, []any{"fp32", "tf32", "bf16", "fp16", "fp8"}, k["values"])
	assert.Equal(t, "engine", k["apply"])

	code, stdout, stderr := studyCLI(t, "knobs", "bucket_mbs")
	assert.Equal(t, exitcode.Input, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `no knob "bucket_mbs" (did you mean "ddp.bucket_mb"?)`)

	code, stdout, _ = studyCLI(t, "knobs", "--json")
	require.Equal(t, 0, code)
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	assert.Greater(t, len(list), 30)
	assert.False(t, strings.Contains(stdout, `"hidden": true`))
}

// TestPlanGPUs: plan --gpus N shows what a study would run on N GPUs from
// any machine: the headline study sweeps the data-parallel knobs on 8, and on
// 1 it plans the one-GPU trials and drops those with their reasons.
func TestPlanGPUs(t *testing.T) {
	code, out, stderr := studyCLI(t, "plan", "studies/gpt.yaml", "--gpus", "8")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "8 ranks")
	assert.Contains(t, out, "note: baseline graphs: true became false")
	for _, k := range []string{"ddp.bucket_mb=5", "ddp.overlap=false", "nccl.algo=Ring", "nccl.proto=LL128"} {
		assert.Contains(t, out, k)
	}
	assert.Contains(t, out, "graphs=true with 8 ranks in the communicator")

	code, out, stderr = studyCLI(t, "plan", "studies/gpt.yaml", "--gpus", "1", "--json")
	require.Equal(t, 0, code, stderr)
	var p planJSON
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	for _, tr := range p.Trials {
		for _, k := range tr.Changed {
			assert.False(t, strings.HasPrefix(k, "ddp.") || strings.HasPrefix(k, "nccl."), "trial %s changes %s on one GPU", tr.ID, k)
		}
	}
	assert.Equal(t, "true", p.Baseline["graphs"])

	code, _, stderr = studyCLI(t, "plan", "studies/gpt.yaml", "--gpus", "-1")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "--gpus -1")
	code, _, stderr = studyCLI(t, "plan", "studies/gpt/smoke.yaml", "--gpus", "2")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "the study runs on the CPU")
}
