package binding

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ZeRO-2 with gradient accumulation (issue 39; zero.cpp ScatterReducer): every
// micro-batch's backward reduce-scatters its buckets and the rank keeps only
// its shard between micro-batches, the running sum (a later micro-batch adds
// it into the rank's own block before the reduce-scatter). DDP sums each
// rank's K micro-batches in .grad() and then the R ranks; ZeRO-2 the same
// terms in another order. In a float32 sum tree a term that goes through d
// additions contributes at most gamma(d) |term| of error (gamma(d) = d u /
// (1 - d u), u = 2^-24): under DDP d <= (K - 1) + (R - 1), under ZeRO-2
// d <= (R - 1) + (K - 1) R (each later micro-batch adds the sum into the
// block, then the ranks). So an averaged gradient element differs from DDP's
// by at most (gamma(K + R - 2) + gamma(K R - 1)) times the sum of its terms'
// magnitudes: 5u = 3.0e-7 of it at 2 ranks and 2 micro-batches, 8u = 4.8e-7
// at 3 (the average's division by 2 is exact). The norm moves by at most as
// much relative to the norm of the terms' magnitudes, so losses and norms keep
// zeroTol (1e-5). The parameters go through AdamW, which divides each update
// by the gradient's own running magnitude: a gradient element within rounding
// of zero may move its update by a large part of lr, and the next forward
// spreads that to every element. That the bound above does not bound, so the
// parameters are compared element by element against a measured floor: the
// same GPT tiny run (lr 3e-2, grad_accum 2, 4 steps) under DDP on 4 Gloo ranks
// with only the all-reduce's summation order changed (one bucket instead of
// a tenth and quarters: Gloo's ring adds the ranks in another order) moved
// 115653 of 132864 elements, the worst by 0.0124 lr, and its parameter sum by
// 1.6e-6 relative (2026-12-07). paramTol, lr/10, is 8 times that floor; a
// lost micro-batch or a wrong block moves elements by about lr. The
// parameter sum is not compared: over the same reorder it moved 1.6e-6 on 4
// ranks and ZeRO-2's 1.4e-5 on 2 (TestZeroClipAndVariants' zeroTol failed on
// it), a sum of 132864 such differences. Stage 1 (DDP's reducer) stays
// bit-identical.
const paramTolLR = 0.1

// zeroAccumCase is a grad_accum case: cfg on world ranks (opts: the backend).
type zeroAccumCase struct {
	name  string
	cfg   engine.Config
	opts  rankOpts
	clips bool // the clip must act on some step (the accumulated shard's norm tested)
}

// TestZeroGradAccum: GPT tiny (the clip acting) and BERT tiny on 2 Gloo ranks
// with grad_accum 2 and 3, with and without ddp.overlap, and the host-staged
// backend (the rehearsal's path): ZeRO-1 bit-identical to DDP, ZeRO-2 within
// zeroTol (losses, norms, the parameters); every micro-batch reduce-scatters
// every bucket; and between micro-batches ZeRO-2 holds its shard (and at
// most the one bucket a collective may still hold) where ZeRO-1 holds every
// gradient. Before issue 39's per-micro-batch reduce ZeRO-2 kept the full
// .grad()s through the accumulation, above ZeRO-1's bytes: the memory check
// fails on that code (docs/zero.md says when it was tried).
func TestZeroGradAccum(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 4, 2
	gpt, bert := zeroCases(t, lib)[0], zeroCases(t, lib)[1]
	gpt.LearningRate = 3e-2 // the clip acts (TestZeroClipAndVariants)
	with := func(c engine.Config, ga int, overlap bool) engine.Config {
		c.GradAccum, c.DDP.Overlap = ga, overlap
		return c
	}
	cases := []zeroAccumCase{
		{"gpt grad_accum 2", with(gpt, 2, true), rankOpts{}, true},
		{"gpt grad_accum 3", with(gpt, 3, true), rankOpts{}, true},
		{"gpt grad_accum 2 without overlap", with(gpt, 2, false), rankOpts{}, true},
		{"bert grad_accum 2", with(bert, 2, true), rankOpts{}, false},
		{"gpt grad_accum 2 host-staged", with(gpt, 2, true), rankOpts{staged: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			desc, err := lib.Describe(tc.cfg)
			require.NoError(t, err)
			z1, z2 := zeroAccumAgainstDDP(t, tc.cfg, func(c engine.Config) []rankResult {
				rs, errs := startRanks(t, lib, c, world, steps, tc.opts)
				for r, err := range errs {
					require.NoError(t, err, "zero.stage %d rank %d", c.Zero.Stage, r)
				}
				return rs
			})
			checkAccumMemory(t, desc.Params, z1, z2, world)
			if tc.clips { // ZeRO-1's norms are DDP's (asserted equal above)
				require.Positive(t, clippedSteps(gradNorms(z1[0].Metrics)), "no step clipped: the clip over the accumulated shard is not tested; raise the learning rate")
			}
		})
	}
}

// zeroAccumAgainstDDP runs cfg through run (its ranks, all succeeding) at
// ZeRO stages 0, 1 and 2, rank 0's parameters dumped after the last step:
// ZeRO-1 bit-identical to DDP; ZeRO-2's losses and norms within zeroTol,
// every parameter element within paramTolLR lr of DDP's, and one
// reduce-scatter a bucket a micro-batch. Returns the ZeRO-1 and -2 ranks.
func zeroAccumAgainstDDP(t *testing.T, cfg engine.Config, run func(engine.Config) []rankResult) (z1, z2 []rankResult) {
	t.Helper()
	require.Positive(t, cfg.LearningRate, "the parameters' bound is in units of the learning rate: set it")
	dumps := map[int][]paramDump{} // rank 0's parameters after the last step, by stage
	dumped := func(c engine.Config) []rankResult {
		dir := t.TempDir()
		t.Setenv("CASESTUDY_PARAM_DUMP", dir)
		rs := run(c)
		sameParams(t, rs)
		d, err := readParamDump(filepath.Join(dir, "rank0.bin"))
		require.NoError(t, err, "zero.stage %d", c.Zero.Stage)
		dumps[c.Zero.Stage] = d
		return rs
	}
	ddp := dumped(cfg)
	z1, z2 = dumped(withZero(cfg, 1)), dumped(withZero(cfg, 2))
	assert.Equal(t, ddp[0].Checksum, z1[0].Checksum, "ZeRO-1 parameters differ from DDP's")
	assert.Equal(t, gradNorms(ddp[0].Metrics), gradNorms(z1[0].Metrics), "ZeRO-1 grad norms")
	assert.Equal(t, ddp[0].Losses, z1[0].Losses, "ZeRO-1 losses")
	worst := 0.0 // the largest relative difference seen, for the log
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Abs(a) }
	for i, m := range z2[0].Metrics {
		want := ddp[0].Metrics[i]
		assert.InEpsilon(t, want.Loss, m.Loss, zeroTol, "step %d loss", i)
		assert.InEpsilon(t, want.GradNorm, m.GradNorm, zeroTol, "step %d grad norm", i)
		worst = max(worst, rel(want.Loss, m.Loss), rel(want.GradNorm, m.GradNorm))
		assert.Equal(t, max(cfg.GradAccum, 1)*opCount(want)["all_reduce"], opCount(m)["reduce_scatter"],
			"step %d: one reduce-scatter a bucket a micro-batch", i)
		checkHeldBuckets(t, m, i)
	}
	assert.False(t, math.IsNaN(z2[0].Checksum.Sum))
	lr := cfg.LearningRate
	moved, far := paramsWithin(t, dumps[0], dumps[2], paramTolLR*lr)
	clipped := clippedSteps(gradNorms(ddp[0].Metrics))
	t.Logf("grad_accum %d: ZeRO-2 against DDP: losses and norms within %.2g relative; parameters: %d of %d elements moved, the worst by %.3g lr (bound %g lr), sum %.2g relative; %d of %d steps clipped",
		cfg.GradAccum, worst, moved, numel(dumps[0]), far/lr, paramTolLR, rel(ddp[0].Checksum.Sum, z2[0].Checksum.Sum), clipped, len(ddp[0].Metrics))
	return z1, z2
}

// checkAccumMemory: between micro-batches (accum_grad_bytes) ZeRO-1 holds
// every gradient (4 bytes a parameter, DDP's bucket storage) and ZeRO-2 its
// shard, 4 bytes a padded element over the ranks, plus at most its largest
// bucket (a Gloo worker may let go of the last collective's buffer a moment
// after the work is done): so ZeRO-2 is below ZeRO-1 by about the gradient
// bytes it shards away.
func checkAccumMemory(t *testing.T, params int64, z1, z2 []rankResult, world int) {
	t.Helper()
	for r := range z2 {
		z := z2[r].Info.Zero
		require.NotNil(t, z, "rank %d: no zero object", r)
		shard := 4 * z.FlatNumel / int64(world)
		for i, m := range z2[r].Metrics {
			m1 := z1[r].Metrics[i]
			largest, _ := scatterBytes(m)
			require.Positive(t, m.AccumGradBytes, "rank %d step %d: ZeRO-2's record has no accum_grad_bytes", r, i)
			assert.GreaterOrEqual(t, m1.AccumGradBytes, 4*params, "rank %d step %d: ZeRO-1 holds every gradient", r, i)
			assert.GreaterOrEqual(t, m.AccumGradBytes, shard, "rank %d step %d: ZeRO-2 holds at least its shard", r, i)
			assert.LessOrEqual(t, m.AccumGradBytes, shard+largest,
				"rank %d step %d: ZeRO-2 held %d gradient bytes between micro-batches, more than its shard (%d) and one bucket (%d)",
				r, i, m.AccumGradBytes, shard, largest)
			sharded := 4*params - shard // what ZeRO-2 shards away, less the padding it adds
			assert.GreaterOrEqual(t, m1.AccumGradBytes-m.AccumGradBytes, sharded-largest,
				"rank %d step %d: ZeRO-2 (%d bytes) is not below ZeRO-1 (%d) by the sharded-away gradients", r, i, m.AccumGradBytes, m1.AccumGradBytes)
		}
	}
	t.Logf("between micro-batches: ZeRO-1 %d, ZeRO-2 %d gradient bytes (%d parameters, %d ranks)",
		z1[0].Metrics[0].AccumGradBytes, z2[0].Metrics[0].AccumGradBytes, params, world)
}

// paramsWithin: every element of got within bound of want's (the same
// parameters, in order); returns how many differ at all and the largest
// difference.
func paramsWithin(t *testing.T, want, got []paramDump, bound float64) (moved int, worst float64) {
	t.Helper()
	require.Len(t, got, len(want), "the two runs' parameter lists")
	for i := range want {
		require.Equal(t, want[i].Shape, got[i].Shape, "parameter %d", i)
		far, at := 0.0, -1
		for j, x := range want[i].Data {
			d := math.Abs(float64(got[i].Data[j]) - float64(x))
			if d > 0 || math.IsNaN(d) {
				moved++
			}
			if d > far || math.IsNaN(d) {
				far, at = d, j
			}
		}
		require.False(t, math.IsNaN(far), "parameter %d %v: NaN", i, want[i].Shape)
		assert.LessOrEqual(t, far, bound, "parameter %d %v element %d: %.3g from DDP's (bound %.3g)", i, want[i].Shape, at, far, bound)
		worst = max(worst, far)
	}
	return moved, worst
}

func numel(ps []paramDump) int {
	n := 0
	for _, p := range ps {
		n += len(p.Data)
	}
	return n
}
