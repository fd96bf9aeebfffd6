package binding

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
)

// traceEvents reads a Chrome trace and returns its complete ("X") events.
func traceEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &doc), "the trace is JSON")
	var out []map[string]any
	for _, e := range doc.TraceEvents {
		if e["ph"] == "X" {
			out = append(out, e)
		}
	}
	return out
}

// TestProfileCPU: after a few steps, cs_profile runs more under the profiler:
// the CPU operators' self times (matmuls among them), the steps' times, a
// Chrome trace of the same operators; the steps continue the engine's count.
func TestProfileCPU(t *testing.T) {
	lib := realLibrary(t)
	_, e := train(t, lib, tinyGPT("fp32"), 2)
	trace := filepath.Join(t.TempDir(), "rank0.r0.trace.json")
	p, err := e.Profile(engine.ProfileRequest{Steps: 3, TracePath: trace})
	require.NoError(t, err)
	assert.Equal(t, 3, p.Steps)
	assert.Equal(t, "cpu", p.Device)
	assert.Len(t, p.StepMS, 3)
	assert.Len(t, p.WallMS, 3)
	for i := range p.StepMS {
		assert.Positive(t, p.StepMS[i])
		assert.GreaterOrEqual(t, p.WallMS[i], p.StepMS[i]*0.99, "the wall time holds the step")
	}
	require.NotEmpty(t, p.Kernels)
	var total, gemm float64
	calls := 0
	for i, k := range p.Kernels {
		assert.False(t, strings.HasPrefix(k.Name, "ProfilerStep#"), "the step annotations are not operators")
		if i > 0 {
			assert.LessOrEqual(t, k.MS, p.Kernels[i-1].MS, "largest first")
		}
		total += k.MS
		calls += k.Calls
		if profile.Category(k.Name) == profile.GEMM {
			gemm += k.MS
		}
	}
	assert.Positive(t, gemm, "the matmuls are there")
	wall := p.WallMS[0] + p.WallMS[1] + p.WallMS[2]
	assert.LessOrEqual(t, total, wall*1.02, "self times do not double count nested operators")
	assert.LessOrEqual(t, p.BusyMS, wall*1.02)
	assert.Positive(t, p.BusyMS)
	assert.Greater(t, calls, 30)

	assert.Equal(t, trace, p.TracePath)
	assert.Equal(t, "engine", p.TraceFormat, "Debian's libtorch has no Kineto: the engine writes the trace")
	assert.Empty(t, p.TraceError)
	st, err := os.Stat(trace)
	require.NoError(t, err)
	assert.Equal(t, st.Size(), p.TraceBytes)
	_, err = os.Stat(trace + ".tmp")
	assert.True(t, errors.Is(err, os.ErrNotExist), "no temporary file left")
	evs := traceEvents(t, trace)
	require.NotEmpty(t, evs)
	names := map[string]bool{}
	for _, ev := range evs {
		names[ev["name"].(string)] = true
	}
	assert.True(t, names["ProfilerStep#0"] && names["ProfilerStep#2"], "the steps are marked in the trace")
	assert.True(t, names["aten::addmm"] || names["aten::mm"] || names["aten::matmul"], "operators in the trace")

	m, err := e.Step()
	require.NoError(t, err)
	assert.Equal(t, 5, m.Step, "the profiled steps are steps of the engine")
}

func TestProfileRequests(t *testing.T) {
	lib := realLibrary(t)
	_, e := train(t, lib, tinyGPT("fp32"), 1)
	_, err := e.Profile(engine.ProfileRequest{Steps: 0})
	assert.ErrorIs(t, err, engine.ErrConfig)
	assert.ErrorContains(t, err, "steps 0 is out of range")

	// A trace that cannot be written: the profile stands, the error says why.
	p, err := e.Profile(engine.ProfileRequest{Steps: 1, TracePath: filepath.Join(t.TempDir(), "missing", "t.json")})
	require.NoError(t, err)
	assert.NotEmpty(t, p.Kernels)
	assert.Contains(t, p.TraceError, "missing")
	assert.Zero(t, p.TraceBytes)

	p, err = e.Profile(engine.ProfileRequest{Steps: 1})
	require.NoError(t, err)
	assert.Empty(t, p.TracePath, "no trace asked, none written")
}

// TestGPUProfile: on CUDA the kernels are CUPTI's (Kineto), the trace is
// Kineto's own, and a graphed step's kernels are traced too.
func TestGPUProfile(t *testing.T) {
	lib := gpuLibrary(t)
	for _, graphs := range []bool{false, true} {
		cfg := gpuGPT("tiny", "bf16", graphs)
		_, e := train(t, lib, cfg, graphWarmup+2)
		trace := filepath.Join(t.TempDir(), "trace.json")
		p, err := e.Profile(engine.ProfileRequest{Steps: 3, TracePath: trace})
		require.NoError(t, err, "graphs=%v", graphs)
		assert.Equal(t, "cuda", p.Device)
		assert.Equal(t, "kineto", p.TraceFormat, "note: %s", p.TraceNote)
		assert.Empty(t, p.TraceError)
		require.NotEmpty(t, p.Kernels, "graphs=%v: no CUDA kernel traced (CUPTI missing?)", graphs)
		var gemm float64
		for _, k := range p.Kernels {
			if profile.Category(k.Name) == profile.GEMM {
				gemm += k.MS
			}
		}
		assert.Positive(t, gemm, "graphs=%v: GEMM kernels", graphs)
		assert.Positive(t, p.BusyMS)
		assert.NotEmpty(t, traceEvents(t, trace))
		s := profile.Summarize(p, nil)
		t.Logf("graphs=%v: %.0f kernels/step, busy %.3f ms of %.3f ms, idle %.0f%%", graphs, s.KernelsPerStep,
			s.BusyMS, s.ProfiledStepMS, 100*s.IdleShare)
	}
}
