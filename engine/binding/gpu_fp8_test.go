package binding

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fp8Recipes are precision fp8's recipes the GPU tests train: per-tensor and
// per-row scaling with e5m2 gradients, and per-tensor with e4m3 gradients.
var fp8Recipes = []engine.FP8Config{{Scaling: "tensor", Grad: "e5m2"}, {Scaling: "row", Grad: "e5m2"}, {Scaling: "tensor", Grad: "e4m3"}}

// TestGPUFP8Trains: the tiny GPT in precision fp8 (its transformer blocks'
// linear layers through FP8 scaled matmuls) trains 20 steps (lr 2e-3, as
// TestTinyGPTLearns) with every loss finite, learns (its loss falls by at
// least half as much as bf16's from the same seed, which must fall too), and
// follows bf16: the first loss (forward only: e4m3 rounding of activations
// and weights, a relative error of a few percent per value that averages out
// over the dot products) within 2%, the last within 5%. Needs a GPU of
// compute capability 8.9 or more (H100, H200); below, the engine must refuse
// with the reason.
func TestGPUFP8Trains(t *testing.T) {
	lib := gpuLibrary(t)
	const steps = 20
	cfg := gpuGPT("tiny", "bf16", false)
	cfg.LearningRate = 2e-3
	probe := cfg
	probe.Precision = "fp8"
	if e, err := lib.Create(probe); err != nil {
		require.ErrorIs(t, err, engine.ErrUnsupported)
		require.Contains(t, err.Error(), "compute capability")
		t.Skipf("this GPU has no FP8 tensor cores; the engine refused: %v", err)
	} else {
		require.NoError(t, e.Close())
	}
	bf16 := trainGPU(t, lib, cfg, steps)
	require.Less(t, bf16[steps-1], bf16[0], "bf16 does not learn: %v", bf16)
	for _, r := range fp8Recipes {
		t.Run(r.Scaling+"-"+r.Grad, func(t *testing.T) {
			c := cfg
			c.Precision, c.FP8 = "fp8", &engine.FP8Config{Scaling: r.Scaling, Grad: r.Grad}
			fp8 := trainGPU(t, lib, c, steps) // every loss finite and positive
			t.Logf("bf16 %v\nfp8  %v", bf16, fp8)
			assert.GreaterOrEqual(t, fp8[0]-fp8[steps-1], 0.5*(bf16[0]-bf16[steps-1]), "fp8 learns less than half as much as bf16")
			assert.InEpsilon(t, bf16[0], fp8[0], 0.02, "first loss")
			assert.InEpsilon(t, bf16[steps-1], fp8[steps-1], 0.05, "last loss")
		})
	}
}

// TestGPUFP8Families: the tiny BERT trains in fp8 too (8 steps, finite,
// learning), and the tiny GPT's fp8 step replays as a CUDA graph with the
// eager losses (the amax scales are computed on the device, nothing syncs the
// host): within 1% relative, as TestGPUGraphsMatchEager's bf16.
func TestGPUFP8Families(t *testing.T) {
	lib := gpuLibrary(t)
	probe := gpuGPT("tiny", "fp8", false)
	if e, err := lib.Create(probe); err != nil {
		t.Skipf("this GPU has no FP8 tensor cores; the engine refused: %v", err)
	} else {
		require.NoError(t, e.Close())
	}
	t.Run("bert", func(t *testing.T) {
		losses := trainGPU(t, lib, gpuFamily("bert", "tiny", "fp8", false), 8)
		assert.Less(t, losses[len(losses)-1], losses[0], "bert fp8 does not learn")
	})
	t.Run("gpt graphs", func(t *testing.T) {
		graphsMatchEager(t, lib, gpuGPT("tiny", "fp8", false), 8, 0.01)
	})
	t.Run("resnet50 refused", func(t *testing.T) {
		_, err := lib.Create(gpuFamily("resnet50", "tiny", "fp8", false))
		assert.ErrorIs(t, err, engine.ErrUnsupported)
		assert.Contains(t, err.Error(), "resnet50 is convolutions")
	})
}
