package binding

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// More of the multi-GPU path on one GPU: an NCCL world of one (dist.backend
// nccl, world_size 1) runs the communicator, its stream and watchdog, and the
// reducer as on N GPUs. NCCL refuses two ranks on one GPU ("Duplicate GPU
// detected"), so this is as far as one GPU goes. Gated like gpu_test.go
// (CASESTUDY_GPU_TESTS=1); run on an H100 by the coordinator.

// worldOfOneMatches: cfg on an NCCL world of one follows cfg without a
// communicator within tol (losses and parameter sum), and every step
// communicated.
func worldOfOneMatches(t *testing.T, lib *Library, cfg engine.Config, steps int, tol float64) []rankResult {
	t.Helper()
	rs := runGPURanks(t, lib, cfg, 1, steps)
	got := globalLosses(rs)
	for i, m := range rs[0].Metrics {
		assert.Positive(t, m.Collectives, "step %d: no collective", i)
		assert.Len(t, m.Buckets, m.Collectives, "step %d", i)
	}
	single := cfg
	single.Device = "cuda"
	single.Dist = engine.DistConfig{WorldSize: 1}
	want, e := train(t, lib, single, steps)
	wantSum, err := e.Checksum()
	require.NoError(t, err)
	t.Logf("losses: NCCL world of one %v, no world %v", got, want)
	for i := range want {
		assert.InEpsilon(t, want[i], got[i], tol, "step %d", i)
	}
	assert.InEpsilon(t, wantSum.Sum, rs[0].Checksum.Sum, tol, "parameter sum")
	return rs
}

// TestGPUWorldOfOnePaths: grad_accum > 1 with DDP (only the last micro-batch
// communicates), ddp.overlap false (buckets launched from finalize), top-k
// (ncclAllGather, the only path that gathers) and channels-last ResNet (its
// weights' strided bucket views and broadcast) on an NCCL world of one.
func TestGPUWorldOfOnePaths(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, tol = 3, 1e-4
	t.Run("grad_accum 2 with DDP", func(t *testing.T) {
		cfg := multiGPT("tiny", "fp32")
		cfg.GradAccum = 2
		rs := worldOfOneMatches(t, lib, cfg, steps, tol)
		assert.Equal(t, cfg.MicroBatch*2, rs[0].Metrics[0].Samples)
	})
	t.Run("ddp.overlap false", func(t *testing.T) {
		cfg := multiGPT("tiny", "fp32")
		cfg.DDP.Overlap = false
		worldOfOneMatches(t, lib, cfg, steps, tol)
	})
	t.Run("top-k compression (ncclAllGather)", func(t *testing.T) {
		cfg := multiGPT("tiny", "fp32")
		cfg.DDP.Compression = "topk"
		cfg.DDP.TopKRatio = 0.1
		rs := runGPURanks(t, lib, cfg, 1, 5)
		losses := globalLosses(rs)
		for i, m := range rs[0].Metrics {
			require.NotEmpty(t, m.Buckets, "step %d", i)
			for _, b := range m.Buckets {
				assert.Equal(t, "all_gather", b.Op, "step %d", i)
				assert.Positive(t, b.Bytes, "step %d", i)
			}
		}
		assert.Less(t, losses[len(losses)-1], losses[0], "top-k with error feedback still trains: %v", losses)
	})
	t.Run("resnet50 tiny channels_last", func(t *testing.T) {
		cfg := tinyResNet()
		cfg.Threads = 0
		cfg.ChannelsLast = true
		cfg.DDP = multiDDP
		worldOfOneMatches(t, lib, cfg, steps, tol)
	})
	t.Run("fp16 loss scaling with top-k", func(t *testing.T) {
		// The scaler's first steps overflow and are skipped; the residual
		// keeps none of their inf, so training resumes once the scale backs
		// off (with the scaled residual of old, every later step was skipped).
		cfg := multiGPT("tiny", "fp16")
		cfg.DDP.Compression = "topk"
		cfg.DDP.TopKRatio = 0.1
		const n = 12
		rs := runGPURanks(t, lib, cfg, 1, n)
		applied := 0
		for i, m := range rs[0].Metrics {
			assert.False(t, isNaNOrInf(m.Loss), "step %d: loss %v", i, m.Loss)
			if i >= n-4 && !m.Skipped {
				applied++
			}
		}
		assert.Positive(t, applied, "none of the last 4 steps applied: the residual kept an inf")
	})
}

func isNaNOrInf(x float64) bool { return x != x || x > 1e308 || x < -1e308 }

// TestGPUStallFaultAborts: the stall fault on an NCCL world of one. A spin
// kernel on the compute stream before bucket 0 holds the bucket's all-reduce
// (the communication stream waits for it) past dist.timeout_ms: the watchdog
// aborts the communicator and the step fails with CS_ERR_COMM within about the
// deadline, long before the stall ends.
func TestGPUStallFaultAborts(t *testing.T) {
	lib := gpuLibrary(t)
	cfg := multiGPT("tiny", "fp32")
	cfg.Dist.TimeoutMS = 2000
	cfg.Fault = engine.FaultConfig{Kind: "stall", Rank: 0, AtStep: 1, SlowMS: 15000}
	start := time.Now()
	_, errs := gpuRanks(t, lib, cfg, 1, 3)
	took := time.Since(start)
	require.Len(t, errs, 1)
	require.Error(t, errs[0])
	msg := errs[0].Error()
	t.Logf("after %v: %s", took, tail(msg))
	assert.Contains(t, msg, "step 1: engine cs_step: communication error")
	assert.Contains(t, msg, "not finished after dist.timeout_ms=2000; communicator aborted")
	assert.Contains(t, msg, "injected fault: stall of 15000 ms before bucket 0")
	assert.False(t, strings.Contains(msg, "killed at the"), "not a hang")
	assert.Less(t, took, 14*time.Second, "failed at the deadline, not when the stall ended")
}
