package binding

import (
	"fmt"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ZeRO's parameter all-gathers overlapped with the next forward
// (zero.overlap_gather, engine/native/src/zero.h) against the same run with
// them waited for in the step. The same bytes land in the same flat buffer
// before any layer reads them, so every loss, gradient norm and parameter bit
// must be the same: a layer that read its parameters before its bucket's
// gather landed would change the next losses. Each comparison runs three
// ways: exposed with the checksum after every step (the reference), overlapped
// without (the forward's waits), and overlapped with the checksum after every
// step (the drain before a read of the parameters outside the forward).

func withGatherOverlap(cfg engine.Config, on bool) engine.Config {
	cfg.Zero.OverlapGather = &on
	return cfg
}

// gatherOverlap: whether cfg's all-gathers overlap the next forward (the
// engine's default when unset).
func gatherOverlap(cfg engine.Config) bool {
	return cfg.Zero.OverlapGather == nil || *cfg.Zero.OverlapGather
}

// ranksRun runs a config on ranks, with extra environment for every rank.
type ranksRun func(c engine.Config, env ...string) []rankResult

func glooRun(t *testing.T, lib *Library, world, steps int, o rankOpts) ranksRun {
	return func(c engine.Config, env ...string) []rankResult {
		o := o
		o.env = append(append([]string(nil), o.env...), env...)
		rs, errs := startRanks(t, lib, c, world, steps, o)
		for r, err := range errs {
			require.NoError(t, err, "zero.stage %d overlap_gather %v rank %d", c.Zero.Stage, gatherOverlap(c), r)
		}
		return rs
	}
}

// gatherRecords: the all-gathers each step's record lists (one per bucket,
// every rank's), with overlap the previous step's (the first step's none),
// and how long the rank waited for them.
func gatherRecords(t *testing.T, rs []rankResult, overlap bool) {
	t.Helper()
	for r, res := range rs {
		z := res.Info.Zero
		require.NotNil(t, z, "rank %d: no zero object in cs_info", r)
		assert.Equal(t, overlap, z.OverlapGather, "rank %d: cs_info's zero.overlap_gather", r)
		if overlap {
			// The cases' buckets are a tenth and a quarter of the model: the
			// forward waits before several layers, not once before the first.
			assert.Greater(t, z.WaitPoints, 1, "rank %d: wait points", r)
			assert.LessOrEqual(t, z.WaitPoints, z.Buckets, "rank %d: at most one wait point a bucket", r)
		} else {
			assert.Zero(t, z.WaitPoints, "rank %d", r)
		}
		for i, m := range res.Metrics {
			gathers, gatherMS := 0, 0.0
			for _, b := range m.Buckets {
				if b.Op == "all_gather" {
					gathers++
					gatherMS += b.MS
					assert.Positive(t, b.MS, "rank %d step %d: an all-gather untimed", r, i)
				}
			}
			assert.GreaterOrEqual(t, m.GatherWaitMS, 0.0, "rank %d step %d", r, i)
			assert.LessOrEqual(t, m.GatherWaitMS, m.ExposedCommMS+1e-9, "rank %d step %d: the wait is exposed communication", r, i)
			if overlap && i == 0 {
				assert.Zero(t, gathers, "rank %d step 0: the first step's forward waited for no all-gather", r)
				assert.Zero(t, m.GatherWaitMS, "rank %d step 0", r)
				continue
			}
			assert.Equal(t, z.Buckets, gathers, "rank %d step %d: one all-gather a bucket", r, i)
			if !overlap {
				assert.Positive(t, m.GatherWaitMS, "rank %d step %d: the step waits for its all-gathers", r, i)
			}
		}
	}
}

// overlapAgainstExposed: cfg with the all-gathers overlapped against the same
// with them exposed, bit for bit, step by step. each: also overlapped with a
// checksum after every step.
func overlapAgainstExposed(t *testing.T, run ranksRun, cfg engine.Config, each bool) {
	t.Helper()
	exposed := run(withGatherOverlap(cfg, false), dpChecksumsEnv+"=1")
	sameParams(t, exposed)
	gatherRecords(t, exposed, false)
	require.NotEmpty(t, exposed[0].Sums)
	overlapped := run(withGatherOverlap(cfg, true))
	sameParams(t, overlapped)
	gatherRecords(t, overlapped, true)
	same := func(what string, got []rankResult) {
		for r := range exposed {
			assert.Equal(t, exposed[r].Losses, got[r].Losses, "%s rank %d: losses", what, r)
			assert.Equal(t, gradNorms(exposed[r].Metrics), gradNorms(got[r].Metrics), "%s rank %d: gradient norms", what, r)
			assert.Equal(t, exposed[r].Checksum, got[r].Checksum, "%s rank %d: parameters", what, r)
		}
	}
	same("overlapped", overlapped)
	t.Logf("stage %d: losses %v; last step's gather wait %.3f ms exposed, %.3f ms overlapped", cfg.Zero.Stage,
		exposed[0].Losses, exposed[0].Metrics[len(exposed[0].Metrics)-1].GatherWaitMS,
		overlapped[0].Metrics[len(overlapped[0].Metrics)-1].GatherWaitMS)
	if !each {
		return
	}
	read := run(withGatherOverlap(cfg, true), dpChecksumsEnv+"=1")
	same("overlapped, checksum after each step", read)
	for r := range exposed {
		assert.Equal(t, exposed[r].Sums, read[r].Sums, "rank %d: the parameters right after each step", r)
	}
}

// TestZeroGatherOverlap: GPT, BERT and ResNet tiny (zeroCases: several
// buckets each) on 2 Gloo ranks, ZeRO 1 and 2.
func TestZeroGatherOverlap(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 3, 2
	run := glooRun(t, lib, world, steps, rankOpts{})
	for _, cfg := range zeroCases(t, lib) {
		for _, stage := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s stage %d", cfg.Family, stage), func(t *testing.T) {
				overlapAgainstExposed(t, run, withZero(cfg, stage), cfg.Family == "gpt")
			})
		}
	}
}

// TestZeroGatherOverlapClipAccum: GPT tiny at a learning rate that makes the
// clip act, with grad_accum 2 (the forward of the second micro-batch finds
// its buckets gathered), ZeRO 1 and 2.
func TestZeroGatherOverlapClipAccum(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 4, 2
	cfg := zeroCases(t, lib)[0]
	cfg.LearningRate, cfg.GradAccum = 3e-2, 2
	run := glooRun(t, lib, world, steps, rankOpts{})
	for _, stage := range []int{1, 2} {
		t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
			c := withZero(cfg, stage)
			norms := gradNorms(run(withGatherOverlap(c, true))[0].Metrics)
			clipped := clippedSteps(norms)
			require.Positive(t, clipped, "no step clipped (norms %v): the test needs clipping", norms)
			overlapAgainstExposed(t, run, c, true)
		})
	}
}

// TestTPZeroGatherOverlap: tp 2 x dp 2 GPT tiny with sequence parallelism:
// the data group's all-gathers on the group communicator's thread.
func TestTPZeroGatherOverlap(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 3, 4
	cfg := tpZeroCase(t, lib, tpGPT(2, true))
	cfg.LearningRate = 3e-2
	run := glooRun(t, lib, world, steps, rankOpts{})
	for _, stage := range []int{1, 2} {
		t.Run(fmt.Sprintf("stage %d", stage), func(t *testing.T) {
			overlapAgainstExposed(t, run, withZero(cfg, stage), stage == 2)
		})
	}
}

// TestStagedZeroGatherOverlap: the host-staged backend (staged_test.go) on
// CPU ranks: its queued all-gathers, waited for layer by layer, as on the
// GPU rehearsal (TestGPUStagedZero's gather overlap cases), GPT tiny ZeRO 2.
func TestStagedZeroGatherOverlap(t *testing.T) {
	lib := glooLibrary(t)
	const steps, world = 3, 2
	run := glooRun(t, lib, world, steps, rankOpts{staged: true})
	overlapAgainstExposed(t, run, withZero(zeroCases(t, lib)[0], 2), true)
}
