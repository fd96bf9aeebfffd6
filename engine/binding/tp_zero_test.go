package binding

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tensor parallelism x ZeRO (engine/native/src/zero.h): ZeRO shards each
// tensor rank's parameters over its data group (ranks t, t + tp, ...), not the
// world. Against tensor parallelism with plain data parallel on the same
// ranks (zero.stage 0: the data group's one flat all-reduce after the
// backward), as zeroAgainstDDP checks ZeRO against DDP: stage 1 all-reduces
// the data group's buckets (a sum of two ranks is the same in any grouping),
// clips by the same norm (tensor_parallel_sumsq, term for term) and applies
// the same per-element update, so its parameters are bit-identical; stage 2
// reduce-scatters and sums the norm from pieces: within zeroTol.

// tpZeroCase is cfg (tp 2) with buckets small enough that a tensor rank's
// parameters span several (the first a tenth of its share, then a quarter).
func tpZeroCase(t *testing.T, lib *Library, cfg engine.Config) engine.Config {
	t.Helper()
	desc, err := lib.Describe(cfg)
	require.NoError(t, err)
	const mib = 1 << 20
	share := float64(4*desc.Params) / float64(cfg.TP.Degree) // about: the replicated parameters are few
	cfg.DDP.FirstBucketMB, cfg.DDP.BucketMB = share/10/mib, share/4/mib
	return cfg
}

// tpZeroCheck: the shards and the step's collectives of ranks rs (cfg at
// zero.stage stage on world ranks, tensor-fastest) against tp's own run (base).
func tpZeroCheck(t *testing.T, cfg engine.Config, stage int, rs, base []rankResult) {
	t.Helper()
	tp := cfg.TP.Degree
	dp := len(rs) / tp
	owned := make([]int64, tp) // per tensor rank, over its data group
	for r, res := range rs {
		z := res.Info.Zero
		require.NotNil(t, z, "stage %d rank %d: no zero object in cs_info", stage, r)
		assert.Equal(t, "data", z.Group, "rank %d", r)
		assert.Equal(t, dp, z.Ranks, "rank %d: shards over the data group", r)
		// zero.overlap_gather as asked, except over NCCL groups (trainer.cpp).
		assert.Equal(t, gatherOverlap(cfg) && res.Info.Backend != "nccl", z.OverlapGather, "rank %d: overlap_gather", r)
		assert.Positive(t, z.OwnedNumel, "rank %d", r)
		owned[r%tp] += z.OwnedNumel
		assert.Equal(t, z.StateBytes, res.Info.OptimStateBytes, "rank %d", r)
		// A tensor rank's states (tp's AdamW) divided over the data group, up to
		// the padding (64 elements a parameter, 64 x dp a bucket; 2 states each).
		padding := int64(64 * (z.Tensors + z.Buckets*dp))
		assert.InDelta(t, float64(base[r].Info.OptimStateBytes)/float64(dp), float64(z.StateBytes), float64(8*padding),
			"rank %d: states %d bytes, tp's %d over %d data ranks", r, z.StateBytes, base[r].Info.OptimStateBytes, dp)
		for i, m := range res.Metrics {
			want := base[r].Metrics[i]
			ops := opCount(m)
			// The data group runs ZeRO's collectives only; each is one bucket.
			assert.Equal(t, len(m.Buckets), m.Collectives-m.TPCollectives, "rank %d step %d: the data group's collectives are the buckets", r, i)
			if stage == 2 && cfg.GradAccum > 1 && cfg.TP.SequenceParallel {
				// Stage 2 sums the sequence-parallel gradients over the tensor
				// group every micro-batch (before its reduce-scatter), tp once.
				assert.Greater(t, m.TPCollectives, want.TPCollectives, "rank %d step %d: the per-micro-batch sequence-parallel sums", r, i)
			} else {
				assert.Equal(t, want.TPCollectives, m.TPCollectives, "rank %d step %d: the tensor group's collectives are tp's", r, i)
			}
			// The engine's own answer (cs_info): over NCCL groups it keeps the
			// all-gathers in the step whatever zero.overlap_gather says.
			overlap := z.OverlapGather
			if !overlap || i > 0 { // overlapped: the previous step's, waited for in this forward
				assert.Equal(t, z.Buckets, ops["all_gather"], "rank %d step %d: one all-gather a bucket", r, i)
			}
			if stage == 1 {
				assert.Equal(t, z.Buckets, ops["all_reduce"], "rank %d step %d: one all-reduce a bucket", r, i)
			} else {
				// ZeRO-2 reduce-scatters every micro-batch (grad_accum).
				assert.Equal(t, max(cfg.GradAccum, 1)*z.Buckets, ops["reduce_scatter"], "rank %d step %d: one reduce-scatter a bucket a micro-batch", r, i)
				assert.Equal(t, 1, ops["all_reduce"], "rank %d step %d: the norm's float64 all-reduce", r, i)
			}
			gatherMS := 0.0
			for _, b := range m.Buckets {
				if b.Op == "all_gather" {
					gatherMS += b.MS
				}
			}
			if overlap { // the all-gathers on the group's thread: only the forward's wait exposed
				assert.InDelta(t, m.CommMS-gatherMS+m.GatherWaitMS, m.ExposedCommMS, 1e-6*m.CommMS+1e-9, "rank %d step %d", r, i)
			} else {
				assert.Equal(t, m.CommMS, m.ExposedCommMS, "rank %d step %d: synchronous, all exposed", r, i)
			}
			// Each collective taken out of the phase (ZeRO's reduce: the tail) it ran in.
			assert.InDelta(t, m.StepMS, m.ForwardMS+m.BackwardMS+m.TailMS+m.OptimizerMS+m.ExposedCommMS, 0.01+1e-6*m.StepMS,
				"rank %d step %d: the parts count each collective once", r, i)
		}
	}
	for k := 1; k < tp; k++ {
		assert.Equal(t, owned[0], owned[k], "tensor ranks 0 and %d shard equal shapes", k)
	}
	assert.Greater(t, owned[0], int64(0))
}

// TestTPZeroMatchesTP: GPT tiny (at a learning rate whose gradient norms
// pass the clip threshold) and BERT tiny, tp 2 x dp 2 with sequence
// parallelism, and GPT tiny without it at grad_accum 2, 3 steps, ZeRO 1 and 2
// against zero.stage 0. fp16's skip
// needs the GPU (libtorch 1.13 has no CPU fp16 autocast): TestGPUTPStaged.
func TestTPZeroMatchesTP(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 3, 4
	gpt := tpGPT(2, true)
	gpt.LearningRate = 3e-2
	accum := tpGPT(2, false) // stage 2 reduces every micro-batch, DDP and stage 1 the last
	accum.GradAccum = 2
	accumSP := tpGPT(2, true) // stage 2: each micro-batch's sequence-parallel sums before its reduce-scatter
	accumSP.GradAccum = 2
	for name, cfg := range map[string]engine.Config{"gpt": gpt, "bert": tpBERT(2, true), "gpt grad_accum 2 without sequence parallel": accum,
		"gpt grad_accum 2 with sequence parallel": accumSP} {
		t.Run(name, func(t *testing.T) {
			cfg = tpZeroCase(t, lib, cfg)
			got := map[int][]rankResult{}
			run := func(c engine.Config) []rankResult {
				rs, errs := startRanks(t, lib, c, world, steps, rankOpts{})
				for r, err := range errs {
					require.NoError(t, err, "zero.stage %d rank %d", c.Zero.Stage, r)
				}
				got[c.Zero.Stage] = rs
				return rs
			}
			zeroAgainstDDP(t, run, cfg, steps, zeroTol)
			base := got[0]
			require.Len(t, base, world)
			for _, stage := range []int{1, 2} {
				require.Len(t, got[stage], world)
				tpZeroCheck(t, cfg, stage, got[stage], base)
				for i, m := range got[stage][0].Metrics {
					assert.InEpsilon(t, base[0].Metrics[i].GradNorm, m.GradNorm, zeroTol, "stage %d step %d grad norm", stage, i)
					if stage == 1 {
						assert.Equal(t, base[0].Metrics[i].GradNorm, m.GradNorm, "stage 1 step %d: tp's norm bit for bit", i)
					}
				}
			}
			if name == "gpt" {
				require.Positive(t, clippedSteps(gradNorms(base[0].Metrics)), "no step clipped (norms %v): the test needs clipping", gradNorms(base[0].Metrics))
			}
		})
	}
}

// TestTPZeroRefused: a data group of one has nothing to shard: refused at
// create with the reason.
func TestTPZeroRefused(t *testing.T) {
	lib := realLibrary(t)
	c := tpGPT(2, false)
	c.Zero.Stage = 1
	c.Dist = engine.DistConfig{WorldSize: 2}
	_, err := lib.Create(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "one data-parallel rank, nothing to shard")
}

// TestGPUTPStagedZero (CASESTUDY_GPU_TESTS=1): tp 2 x dp 2 with sequence
// parallelism as four CUDA ranks sharing GPU 0 through the host-staged groups
// (the rehearsal's path), GPT tiny in fp32 and fp16 (loss scaling: fp16's
// skipped steps and loss scales must be tp's; BERT runs on CPU ranks above),
// ZeRO 1 and 2 against zero.stage 0 on the same ranks, with tpZeroCheck's
// shards and collectives. fp16 runs tpZeroFP16AgainstDDP (issue 39: ZeRO-2
// bit-identical to DDP with the clip disengaged, within lr/2 an element with
// it): nine launches of four ranks, fp32 three.
func TestGPUTPStagedZero(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, world = 3, 4
	for _, tt := range []struct{ family, precision string }{
		{"gpt", "fp32"}, {"gpt", "fp16"},
	} {
		t.Run(tt.family+" "+tt.precision, func(t *testing.T) {
			cfg := tpGPUConfig(true, tt.family)
			cfg.Precision = tt.precision
			cfg = tpZeroCase(t, lib, cfg)
			if tt.precision == "fp16" {
				tpZeroFP16AgainstDDP(t, func(t *testing.T, c engine.Config) []rankResult { return stagedRanks(t, lib, c, world, steps) }, cfg,
					func(t *testing.T, stage int, rs, ddp []rankResult) { tpZeroCheck(t, cfg, stage, rs, ddp) })
				return
			}
			got := map[int][]rankResult{}
			run := func(c engine.Config) []rankResult {
				rs := stagedRanks(t, lib, c, world, steps)
				got[c.Zero.Stage] = rs
				return rs
			}
			zeroAgainstDDP(t, run, cfg, steps, zeroTol)
			for _, stage := range []int{1, 2} {
				tpZeroCheck(t, cfg, stage, got[stage], got[0])
			}
		})
	}
}

// TestGPUMultiTPZero (CASESTUDY_GPU_TESTS=1, CASESTUDY_GPUS >= 4): tp 2 x dp
// 2 with sequence parallelism on four GPUs over NCCL (the data group's
// ncclAllReduce, ncclReduceScatter and ncclAllGather through
// group_communicator), GPT tiny in fp32 and fp16, ZeRO 1 and 2 against
// zero.stage 0 on the same GPUs, with tpZeroCheck; fp16 as TestGPUTPStagedZero's
// (tpZeroFP16AgainstDDP: the same norm grouping, not measured over NCCL yet).
// Skipped below four GPUs.
func TestGPUMultiTPZero(t *testing.T) {
	const steps, world = 4, 4
	lib := multiGPUAtLeast(t, world, "tp 2 x dp 2")
	for _, precision := range []string{"fp32", "fp16"} {
		t.Run(precision, func(t *testing.T) {
			cfg := tpGPUConfig(true, "gpt")
			cfg.Precision = precision
			cfg = tpZeroCase(t, lib, cfg)
			if precision == "fp16" { // the norm's grouping as on the staged ranks (tpZeroFP16AgainstDDP)
				tpZeroFP16AgainstDDP(t, func(t *testing.T, c engine.Config) []rankResult {
					rs := runGPURanks(t, lib, c, world, steps)
					assertSplitGroups(t, rs)
					return rs
				}, cfg, func(t *testing.T, stage int, rs, ddp []rankResult) { tpZeroCheck(t, cfg, stage, rs, ddp) })
				return
			}
			got := map[int][]rankResult{}
			run := func(c engine.Config) []rankResult {
				rs := runGPURanks(t, lib, c, world, steps)
				assertSplitGroups(t, rs)
				got[c.Zero.Stage] = rs
				return rs
			}
			zeroAgainstDDP(t, run, cfg, steps, zeroTol)
			for _, stage := range []int{1, 2} {
				tpZeroCheck(t, cfg, stage, got[stage], got[0])
			}
		})
	}
}
