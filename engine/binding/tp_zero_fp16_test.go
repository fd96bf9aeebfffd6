package binding

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tpZeroFP16AgainstDDP is zeroAgainstDDP for fp16 under tensor parallelism
// (issue 39), where ZeRO-2 cannot be held to zeroTol on the parameter sum.
// Measured on the H100 (TestGPUTPZeroDiagnose, 2026-12-07, main 6318563; tp 2
// x dp 2 sequence parallel, staged CUDA ranks, GPT tiny, 3 steps): with the
// clip disengaged (CASESTUDY_MAX_GRAD_NORM=1e30) fp16 ZeRO-2 was bit-identical
// to DDP, every element; clipped it differed from step 1's update on
// (parameter sum relative 2.35e-5, every element within lr/2 of DDP's, the
// largest 0.495 lr on a bias; step 1's float32 grad norms printed equal, step
// 2's 63 ulps apart). The cause is the clip coefficient: ZeRO-2 sums the
// norm's squares from its pieces, DDP from whole tensors, so it is off in its
// last bits; fp16's rounding and Adam amplify that (a near-zero gradient
// whose sign moves shifts its parameter by a full lr step). So:
//   - unclipped: ZeRO-1 and ZeRO-2 bit-identical to DDP (checksum, losses,
//     skips and loss scales): nothing but the norm may differ;
//   - clipped: ZeRO-1 still bit-identical (it sums the norm as DDP does);
//     ZeRO-2's skips and loss scales DDP's, its losses within fp16Tol, and
//     every parameter element of every tensor rank (the gathered dumps,
//     CASESTUDY_PARAM_DUMP) within lr/2 of DDP's: the bound the measured
//     mechanism kept (0.495 lr at most); more means a difference other than the
//     clip coefficient's last bits.
//
// run launches the ranks of a config; check (may be nil) gets each stage's
// ranks with DDP's (tpZeroCheck). Both get the (sub)test they run in.
func tpZeroFP16AgainstDDP(t *testing.T, run func(*testing.T, engine.Config) []rankResult, cfg engine.Config,
	check func(t *testing.T, stage int, rs, ddp []rankResult)) {
	t.Helper()
	tp := cfg.TP.Degree
	require.GreaterOrEqual(t, tp, 1)
	launch := func(t *testing.T, c engine.Config) ([]rankResult, [][]paramDump) {
		dir := t.TempDir()
		t.Setenv("CASESTUDY_PARAM_DUMP", dir)
		rs := run(t, c)
		sameParams(t, rs)
		require.GreaterOrEqual(t, len(rs), tp)
		dumps := make([][]paramDump, tp) // tensor-fastest: ranks 0..tp-1 hold every tensor rank's parameters
		for r := range dumps {
			d, err := readParamDump(filepath.Join(dir, fmt.Sprintf("rank%d.bin", r)))
			require.NoError(t, err, "zero.stage %d rank %d", c.Zero.Stage, r)
			dumps[r] = d
		}
		return rs, dumps
	}
	skips := func(rs []rankResult) []string { return records(rs[0].Metrics) }
	for _, clip := range []struct{ name, maxNorm string }{{"unclipped", "1e30"}, {"clipped", ""}} {
		t.Run(clip.name, func(t *testing.T) {
			t.Setenv("CASESTUDY_MAX_GRAD_NORM", clip.maxNorm)
			ddp, dd := launch(t, cfg)
			t.Logf("%s DDP: losses %v, norms %v, %v", clip.name, ddp[0].Losses, gradNorms(ddp[0].Metrics), skips(ddp))
			for _, stage := range []int{1, 2} {
				rs, zd := launch(t, withZero(cfg, stage))
				t.Logf("%s stage %d: losses %v, norms %v", clip.name, stage, rs[0].Losses, gradNorms(rs[0].Metrics))
				assert.Equal(t, skips(ddp), skips(rs), "%s stage %d: fp16 skips and loss scales", clip.name, stage)
				if check != nil {
					check(t, stage, rs, ddp)
				}
				if stage == 1 || clip.maxNorm != "" {
					assert.Equal(t, ddp[0].Checksum, rs[0].Checksum, "%s: ZeRO-%d parameters differ from DDP's", clip.name, stage)
					assert.Equal(t, ddp[0].Losses, rs[0].Losses, "%s: ZeRO-%d losses", clip.name, stage)
					continue
				}
				for i := range ddp[0].Losses {
					assert.InEpsilon(t, ddp[0].Losses[i], rs[0].Losses[i], fp16Tol, "clipped ZeRO-2 step %d loss", i)
				}
				lr := cfg.LearningRate
				for r := range dd {
					require.Len(t, zd[r], len(dd[r]), "tensor rank %d: the two runs' parameter lists", r)
					for i := range dd[r] {
						require.Equal(t, dd[r][i].Shape, zd[r][i].Shape, "tensor rank %d parameter %d", r, i)
						worst, at := 0.0, -1
						for j, x := range dd[r][i].Data {
							if d := math.Abs(float64(zd[r][i].Data[j]) - float64(x)); d > worst || math.IsNaN(d) {
								worst, at = d, j
							}
						}
						require.False(t, math.IsNaN(worst), "clipped ZeRO-2, tensor rank %d parameter %d: NaN", r, i)
						assert.LessOrEqual(t, worst, lr/2,
							"clipped ZeRO-2, tensor rank %d parameter %d %v element %d: %.3g lr from DDP's (bound lr/2)",
							r, i, dd[r][i].Shape, at, worst/lr)
					}
				}
				t.Logf("clipped ZeRO-2 against DDP, rank 0:\n%s", describeZeroDiff(ddp[0], rs[0], dd[0], zd[0], lr))
			}
		})
	}
}
