package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

// tpLibOrSkip is the engine library, skipping (failing under CI=true) when
// it predates tensor parallelism (its config refuses the tp object).
func tpLibOrSkip(t *testing.T) string {
	t.Helper()
	path := engineLibOrSkip(t)
	lib, err := binding.Load(path)
	require.NoError(t, err)
	defer lib.Close()
	_, err = lib.Describe(engine.Config{Family: "gpt", Preset: "tiny", MicroBatch: 1, Device: "cpu", Precision: "fp32",
		GradAccum: 1, Dist: engine.DistConfig{WorldSize: 2}, TP: &engine.TPConfig{Degree: 2}})
	if err != nil && strings.Contains(err.Error(), `"tp"`) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the engine library does not know tp: %v", err)
		}
		t.Skipf("the engine library predates tensor parallelism: %v", err)
	}
	return path
}

// TestRunRehearseTPCPU rehearses a tiny GPT's tensor parallelism on 4 CPU
// ranks through the host-staged backend: tp 2 x dp 2 with sequence
// parallelism off and on, and tp 4. Every trial runs; the checksums agree
// (each rank's is of the model gathered over its tensor group); the losses
// follow one rank without tp training the same global batch (micro-batch x
// data-parallel ranks) within fp32's 1e-5; the ranks of a tensor group other
// than its tensor rank 0 count no samples; the report names the layout.
func TestRunRehearseTPCPU(t *testing.T) {
	lib := tpLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	path := writeRehearsalStudy(t, "rehearse-tp.yaml", `name: rehearse-tp
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 4, warmup_steps: 1, steps: 2, timeout: 2m, threads: 1}
baseline: {precision: fp32}
sweep:
  strategy: list
  trials:
    - {tp.degree: 2}
    - {tp.degree: 2, tp.sequence_parallel: true}
    - {tp.degree: 4}
    - {tp.degree: 2, precision: bf16}
`)
	out := filepath.Join(filepath.Dir(path), "results")
	code, stdout, stderr := runCLI(t, "run", path, "--rehearse", "--rehearse-faults=false", "--out", out, "--kill-grace", "500ms")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	dir := onlyRunDir(t, out)
	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	require.Len(t, run.Trials, 4)
	for _, tr := range run.Trials {
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		tp := 2
		if tr.Knobs["tp.degree"] == "4" {
			tp = 4
		}
		assert.Equal(t, tp, tr.Rehearsal.TensorPar)
		assert.Positive(t, tr.Rehearsal.ProcessBytes, "trial %s: the process memory the plan counted, recorded", tr.ID)
		assert.Equal(t, 4/tp, tr.Rehearsal.DataPar)
		ref := tr.Rehearsal.Reference
		require.NotNil(t, ref, tr.ID)
		assert.Equal(t, store.OK, ref.Outcome, ref.Error)
		assert.Equal(t, 2*(4/tp), ref.MicroBatch, "trial %s: the data-parallel ranks' global batch", tr.ID)
		if tr.Knobs["precision"] == "bf16" { // its fp32 twin: the trial's own 4 ranks in fp32
			require.NotNil(t, tr.Rehearsal.TwinFP32, tr.ID)
			assert.Equal(t, store.OK, tr.Rehearsal.TwinFP32.Outcome, tr.Rehearsal.TwinFP32.Error)
			assert.Len(t, tr.Rehearsal.TwinFP32.Losses, 2)
		} else {
			assert.Nil(t, tr.Rehearsal.TwinFP32, "trial %s in fp32: its own twin", tr.ID)
		}
		for _, r := range tr.Repeats[0].Ranks {
			for _, st := range r.Steps {
				if r.Rank%tp == 0 {
					assert.Equal(t, 2, st.Samples, "trial %s rank %d", tr.ID, r.Rank)
				} else {
					assert.Zero(t, st.Samples, "trial %s rank %d: its tensor group's samples count on tensor rank 0", tr.ID, r.Rank)
				}
			}
		}
	}

	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	require.NoError(t, err)
	var s report.Summary
	require.NoError(t, json.Unmarshal(raw, &s))
	require.NotNil(t, s.Rehearsal)
	require.Len(t, s.Rehearsal.Trials, 4)
	for _, rt := range s.Rehearsal.Trials {
		require.NotNil(t, rt.Checksums, rt.ID)
		require.NotNil(t, rt.Checksums.DataParallelEqual, rt.Checksums.Detail)
		assert.True(t, *rt.Checksums.DataParallelEqual, "%s: %s", rt.ID, rt.Checksums.Detail)
		require.NotNil(t, rt.Losses, rt.ID)
		require.NotNil(t, rt.Losses.Agree, rt.Losses.Detail)
		assert.True(t, *rt.Losses.Agree, "%s: %s", rt.ID, rt.Losses.Detail)
		assert.Contains(t, strings.Join(rt.Paths, "; "), "tensor-parallel layers over groups of")
		if strings.Contains(rt.Losses.Detail, "bf16") {
			assert.Contains(t, rt.Losses.Detail, "the trial's layout in fp32 follows one rank in fp32 within 1e-5")
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "tensor parallel 2 x data parallel 2 x 1 stages")
}
