package binding

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// assertBestCut: a two-stage split by time is the best contiguous one for
// the measured layer times (no other cut has a lighter heaviest stage).
func assertBestCut(t *testing.T, p *engine.PipelineInfo) {
	t.Helper()
	heaviest := func(cut int) float64 {
		a, b := 0.0, 0.0
		for i, ms := range p.LayerMS {
			if i < cut {
				a += ms
			} else {
				b += ms
			}
		}
		return max(a, b)
	}
	chosen := heaviest(p.Balance[0])
	for cut := 1; cut < len(p.LayerMS); cut++ {
		assert.LessOrEqual(t, chosen, heaviest(cut)+1e-9, "cut after layer %d is lighter than %v (times %v)", cut, p.Balance, p.LayerMS)
	}
}

// TestGPUPipelineBalanceByTime (CASESTUDY_GPU_TESTS=1): pipeline.balance_by
// time on the GPU, ResNet tiny, its stages and replicas CUDA ranks sharing
// device 0 through the staged backend (as TestGPUStagedPipeline; NCCL refuses
// two ranks on one GPU). Each rank times every layer on the GPU, the times go
// through the float64 all-reduce and broadcast of the pipeline's measurement,
// and every rank then reports the same per-layer times and the same split, the
// best contiguous one for those times, in its cs_info (what the runner keeps
// as ranks[].info.pipeline). With 2 stages × 1 replica the losses follow one
// rank accumulating the same micro-batches; with 2 × 2 the replicas of a stage
// end identical.
func TestGPUPipelineBalanceByTime(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, stages = 3, 2
	for _, dp := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d stages x %d replicas", stages, dp), func(t *testing.T) {
			cfg := ppConfig("resnet50")
			cfg.Device, cfg.Threads = "cuda", 0
			cfg.Pipeline.Microbatches = 2
			c := cfg
			c.Pipeline.Stages, c.Pipeline.Schedule, c.Pipeline.BalanceBy = stages, "1f1b", "time"
			rs := stagedRanks(t, lib, c, stages*dp, steps)
			p0 := rs[0].Info.Pipeline
			require.NotNil(t, p0)
			assert.Equal(t, "time", p0.BalanceBy)
			require.Len(t, p0.LayerMS, 6, "stem, 4 blocks, head")
			for i, ms := range p0.LayerMS {
				assert.Positive(t, ms, "layer %d", i)
			}
			require.Len(t, p0.Balance, stages)
			for r, res := range rs {
				require.NotNil(t, res.Info.Pipeline, "rank %d", r)
				assert.Equal(t, "time", res.Info.Pipeline.BalanceBy, "rank %d", r)
				assert.Equal(t, p0.LayerMS, res.Info.Pipeline.LayerMS, "rank %d measured differently", r)
				assert.Equal(t, p0.Balance, res.Info.Pipeline.Balance, "rank %d split differently", r)
				for i, l := range res.Losses {
					assert.False(t, math.IsNaN(l) || math.IsInf(l, 0), "rank %d step %d", r, i)
				}
			}
			assertBestCut(t, p0)
			t.Logf("GPU layer ms %v -> balance %v", p0.LayerMS, p0.Balance)
			if dp == 1 {
				// BatchNorm normalises per micro-batch, so only one replica
				// can follow one rank; cuDNN's autotuning may pick other
				// algorithms in another process, hence 1e-4, not 1e-5.
				want, _ := singleRank(t, lib, cfg, 1, steps)
				for r, res := range rs {
					for i := range want {
						assert.InEpsilon(t, want[i], res.Losses[i], 1e-4, "rank %d step %d (one rank %v, pipeline %v)", r, i, want, res.Losses)
					}
				}
				return
			}
			for s := 0; s < stages; s++ {
				assert.Equal(t, rs[s].Checksum, rs[stages+s].Checksum, "stage %d differs between replicas", s)
			}
		})
	}
}
