package engine

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GPU tests run on the H200 machine (scripts/gpu-check.sh runs this package's
// test binary, built here with `go test -c`, with CASESTUDY_GPU_TESTS=1).

func gpuLibrary(t *testing.T) *Library {
	t.Helper()
	if os.Getenv("CASESTUDY_GPU_TESTS") != "1" {
		t.Skip("GPU test: set CASESTUDY_GPU_TESTS=1 on a machine with a CUDA build of the engine")
	}
	lib := realLibrary(t)
	bi, err := lib.BuildInfo()
	require.NoError(t, err)
	require.True(t, bi.CUDAAvailable, "CASESTUDY_GPU_TESTS=1 but the engine sees no CUDA device: %+v", bi)
	t.Logf("engine %s: torch %s, CUDA %s, NCCL %s, %d device(s)", lib.Path(), bi.Torch, bi.CUDA, bi.NCCL, bi.DeviceCount)
	return lib
}

func gpuGPT(preset, precision string, graphs bool) Config {
	c := Config{
		Family: "gpt", Preset: preset, MicroBatch: 8, Device: "cuda", Precision: precision,
		Graphs: graphs, GradAccum: 1, Seed: 11, Dist: DistConfig{WorldSize: 1},
	}
	if preset == "124m" {
		c.MicroBatch, c.SeqLen = 4, 1024
	}
	return c
}

func TestGPUSteps(t *testing.T) {
	lib := gpuLibrary(t)
	for _, preset := range []string{"tiny", "124m"} {
		for _, v := range []struct {
			precision string
			graphs    bool
		}{{"fp32", false}, {"bf16", false}, {"bf16", true}} {
			name := fmt.Sprintf("%s/%s/graphs=%v", preset, v.precision, v.graphs)
			t.Run(name, func(t *testing.T) {
				cfg := gpuGPT(preset, v.precision, v.graphs)
				e, err := lib.Create(cfg)
				require.NoError(t, err)
				defer e.Close()
				info, err := e.Info()
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(info.Device, "cuda"), "device %q", info.Device)
				assert.NotEmpty(t, info.DeviceName)
				assert.Equal(t, v.precision, info.Precision)
				for i := range 6 {
					m, err := e.Step()
					require.NoError(t, err, "step %d", i)
					assert.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "step %d loss %v", i, m.Loss)
					assert.Positive(t, m.Loss, "step %d", i)
					assert.Positive(t, m.StepMS, "step %d", i)
					assert.Positive(t, m.TokensPerS, "step %d", i)
					assert.Positive(t, m.SamplesPerS, "step %d", i)
					assert.Positive(t, m.TFLOPS, "step %d", i)
					assert.Positive(t, m.MemPeakBytes, "step %d", i)
					assert.GreaterOrEqual(t, m.MemReservedBytes, m.MemPeakBytes, "step %d", i)
					if i == 5 {
						t.Logf("%s: loss %.4f, %.2f ms/step, %.0f tokens/s, %.1f TFLOP/s, MFU %.3f, peak memory %.2f GiB",
							name, m.Loss, m.StepMS, m.TokensPerS, m.TFLOPS, m.MFU, float64(m.MemPeakBytes)/(1<<30))
					}
				}
			})
		}
	}
}

// TestGPUGraphsMatchEager trains the same model from the same seed eagerly and
// with the whole step captured in a CUDA graph. Tolerance: every loss of the
// 8 steps agrees within 0.5% relative. A graph replays the kernels eager mode
// launched, on the same data, so the only differences are reduction orders
// inside kernels that cuBLAS or the attention backend picks differently under
// capture. On the H200 (torch 2.11, 2026-12-02) tiny was bitwise equal and
// 124m within 0.011%; 0.5% leaves room for other versions. Tiny's loss falls
// 2.6% in these 8 steps, so a replay that reused stale inputs or skipped the
// optimizer fails here; 124m's barely moves in 8 steps (it is checked for
// agreement, not for learning).
func TestGPUGraphsMatchEager(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, tol = 8, 0.005
	for _, preset := range []string{"tiny", "124m"} {
		t.Run(preset, func(t *testing.T) {
			eager, _ := train(t, lib, gpuGPT(preset, "bf16", false), steps)
			graphs, _ := train(t, lib, gpuGPT(preset, "bf16", true), steps)
			t.Logf("eager  %v\ngraphs %v", eager, graphs)
			for i := range eager {
				assert.InEpsilon(t, eager[i], graphs[i], tol, "step %d", i)
			}
			if preset == "tiny" {
				assert.Less(t, graphs[steps-1], 0.99*graphs[0], "graph replay does not train")
			}
		})
	}
}
