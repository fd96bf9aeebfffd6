package binding

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GPU tests run on the H200 machine (scripts/gpu-check.sh runs this package's
// test binary, built here with `go test -c`, with CASESTUDY_GPU_TESTS=1). They
// prove correctness quickly (about a minute in all): the tiny presets in every
// precision, the full presets in bf16 eager and with CUDA graphs for a few
// steps. Throughput is measured by scripts, not tests
// (engine/native/tools/cs_bench.py, bench/reference/).

// graphWarmup is the trainer's kGraphWarmup (trainer.h): eager steps before
// the step is captured; from that step on every step is a graph replay.
const graphWarmup = 3

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

// TestGPULibraryCopies: the cuDNN this process runs is the version torch was
// built with. The loader takes one copy a process and the engine is loaded
// before torch: a system libcudnn.so.9 first on the engine's RUNPATH would
// serve torch's attention and convolutions (7242a59's slower GPT-2, measured:
// docs/perf.md, "Twenty-fourth session"). Major and minor
// must match; a patch level may differ. Logs every loaded copy's path.
func TestGPULibraryCopies(t *testing.T) {
	lib := gpuLibrary(t)
	bi, err := lib.BuildInfo()
	require.NoError(t, err)
	t.Logf("cuDNN built %q, loaded %q; libraries %v", bi.CuDNN, bi.CuDNNRuntime, bi.Libraries)
	e, err := lib.Create(gpuGPT("tiny", "bf16", false))
	require.NoError(t, err)
	defer e.Close()
	info, err := e.Info()
	require.NoError(t, err)
	t.Logf("after create: cuDNN loaded %q; libraries %v", info.CuDNNRuntime, info.Libraries)
	require.NotEmpty(t, info.Libraries, "a CUDA rank records its libraries")
	path, same := engine.CuDNNCopy(bi.CuDNN, info.CuDNNRuntime, info.Libraries)
	if bi.CuDNN != "" { // torch has cuDNN: its libtorch_cuda loads it with the engine, so a rank must report it
		require.NotEqual(t, "?", path, "no libcudnn.so among the rank's libraries %v", info.Libraries)
		require.NotEmpty(t, info.CuDNNRuntime, "cuDNN loaded from %s but no version reported", path)
	}
	assert.True(t, same, "the loaded cuDNN %s (%s) is not torch's %s", info.CuDNNRuntime, path, bi.CuDNN)
}

func gpuGPT(preset, precision string, graphs bool) engine.Config {
	c := engine.Config{
		Family: "gpt", Preset: preset, MicroBatch: 8, Device: "cuda", Precision: precision,
		Graphs: graphs, GradAccum: 1, Seed: 11, Dist: engine.DistConfig{WorldSize: 1},
	}
	if preset == "124m" {
		c.MicroBatch, c.SeqLen = 4, 1024
	}
	return c
}

// gpuPrecisions is every precision eagerly, and bf16 replayed as a CUDA graph.
var gpuPrecisions = []struct {
	precision string
	graphs    bool
}{{"fp32", false}, {"tf32", false}, {"fp16", false}, {"bf16", false}, {"bf16", true}}

// trainGPU creates an engine on the GPU from cfg, runs steps, checks that every
// step's metrics are complete and that graph mode really replays (forward and
// backward times are 0 exactly on replayed steps), and returns the losses.
func trainGPU(t *testing.T, lib *Library, cfg engine.Config, steps int) []float64 {
	t.Helper()
	e, err := lib.Create(cfg)
	require.NoError(t, err)
	defer func() { assert.NoError(t, e.Close()) }()
	info, err := e.Info()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(info.Device, "cuda"), "device %q", info.Device)
	assert.NotEmpty(t, info.DeviceName)
	assert.Equal(t, cfg.Precision, info.Precision)
	losses := make([]float64, steps)
	var last engine.StepMetrics
	for i := range losses {
		m, err := e.Step()
		require.NoError(t, err, "step %d", i)
		require.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "step %d loss %v", i, m.Loss)
		assert.Positive(t, m.Loss, "step %d", i)
		assert.Positive(t, m.StepMS, "step %d", i)
		assert.Positive(t, m.SamplesPerS, "step %d", i)
		assert.Positive(t, m.TFLOPS, "step %d", i)
		assert.Positive(t, m.MemPeakBytes, "step %d", i)
		assert.GreaterOrEqual(t, m.MemReservedBytes, m.MemPeakBytes, "step %d", i)
		if cfg.Family != "resnet50" {
			assert.Positive(t, m.TokensPerS, "step %d", i)
		}
		if cfg.Precision == "fp16" {
			assert.Positive(t, m.LossScale, "step %d: fp16 without a loss scale", i)
		} else {
			assert.Zero(t, m.LossScale, "step %d", i)
			assert.False(t, m.Skipped, "step %d skipped outside fp16", i)
		}
		if replayed := cfg.Graphs && i >= graphWarmup; replayed {
			assert.Zero(t, m.ForwardMS+m.BackwardMS, "step %d should be a graph replay", i)
		} else {
			assert.Positive(t, m.ForwardMS, "step %d: eager step without a forward time", i)
			assert.Positive(t, m.BackwardMS, "step %d: eager step without a backward time", i)
		}
		losses[i], last = m.Loss, m
	}
	t.Logf("%s-%s %s graphs=%v: loss %.4f, %.2f ms/step, %.0f samples/s, %.1f TFLOP/s, MFU %.3f, peak %.2f GiB",
		cfg.Family, cfg.Preset, cfg.Precision, cfg.Graphs, last.Loss, last.StepMS, last.SamplesPerS,
		last.TFLOPS, last.MFU, float64(last.MemPeakBytes)/(1<<30))
	return losses
}

// graphsMatchEager trains cfg from the same seed eagerly and as a CUDA graph
// and checks every loss agrees within tol (relative).
func graphsMatchEager(t *testing.T, lib *Library, cfg engine.Config, steps int, tol float64) (eager, graphs []float64) {
	t.Helper()
	require.Greater(t, steps, graphWarmup+1, "too few steps to replay a graph twice")
	cfg.Graphs = false
	eager = trainGPU(t, lib, cfg, steps)
	cfg.Graphs = true
	graphs = trainGPU(t, lib, cfg, steps)
	t.Logf("eager  %v\ngraphs %v", eager, graphs)
	for i := range eager {
		assert.InEpsilon(t, eager[i], graphs[i], tol, "step %d", i)
	}
	return eager, graphs
}

// TestGPUSteps: the tiny GPT in every precision and as a CUDA graph.
func TestGPUSteps(t *testing.T) {
	lib := gpuLibrary(t)
	for _, v := range gpuPrecisions {
		t.Run(fmt.Sprintf("tiny/%s/graphs=%v", v.precision, v.graphs), func(t *testing.T) {
			trainGPU(t, lib, gpuGPT("tiny", v.precision, v.graphs), 6)
		})
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
			_, graphs := graphsMatchEager(t, lib, gpuGPT(preset, "bf16", false), steps, tol)
			if preset == "tiny" {
				assert.Less(t, graphs[steps-1], 0.99*graphs[0], "graph replay does not train")
			}
		})
	}
}

// TestGPUGraphsStudyCombos: the headline studies (studies/gpt.yaml, bert.yaml,
// resnet50.yaml) start from graphs: true, so every knob they sweep runs
// replayed as a CUDA graph: each such combination on the tiny presets, eager
// and as a graph from the same seed, every loss of 6 steps within 1%
// relative (TestGPUFamilyGraphsMatchEager's tolerance). fp16 replays the loss
// scaler's skip decisions, activation checkpointing recomputes inside the
// captured backward, grad_accum captures several micro-batches.
func TestGPUGraphsStudyCombos(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, tol = 6, 0.01
	with := func(c engine.Config, f func(*engine.Config)) engine.Config { f(&c); return c }
	gpt := gpuGPT("tiny", "bf16", false)
	bert := gpuFamily("bert", "tiny", "bf16", false)
	resnet := gpuFamily("resnet50", "tiny", "bf16", false)
	for _, v := range []struct {
		name string
		cfg  engine.Config
	}{
		{"gpt/fp32", with(gpt, func(c *engine.Config) { c.Precision = "fp32" })},
		{"gpt/tf32", with(gpt, func(c *engine.Config) { c.Precision = "tf32" })},
		{"gpt/fp16", with(gpt, func(c *engine.Config) { c.Precision = "fp16" })},
		{"gpt/activation_checkpointing", with(gpt, func(c *engine.Config) { c.ActivationCheckpointing = true })},
		{"gpt/grad_accum=2", with(gpt, func(c *engine.Config) { c.GradAccum = 2 })},
		{"gpt/micro_batch=32", with(gpt, func(c *engine.Config) { c.MicroBatch = 32 })},
		{"bert/fp16", with(bert, func(c *engine.Config) { c.Precision = "fp16" })},
		{"bert/grad_accum=2", with(bert, func(c *engine.Config) { c.GradAccum = 2 })},
		{"resnet50/fp16/channels_last", with(resnet, func(c *engine.Config) { c.Precision = "fp16"; c.ChannelsLast = true })},
		{"resnet50/bf16/channels_last", with(resnet, func(c *engine.Config) { c.ChannelsLast = true })},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.cfg.Family == "resnet50" {
				// cuDNN's heuristics, as studies/resnet50.yaml's baseline: autotuning
				// may pick other algorithms in the eager and the graphed engine, and
				// their rounding alone moved the tiny ResNet's fp16 loss 4% by step 5
				// (H200, c4c23e2: step 0 already 1e-5 apart, before any graph).
				t.Setenv("CASESTUDY_CUDNN_BENCHMARK_LIMIT", "off")
			}
			graphsMatchEager(t, lib, v.cfg, steps, tol)
		})
	}
}

// TestGPUBF16TracksFP32 trains the tiny GPT, BERT and ResNet from the same
// seed in fp32, fp16 and bf16 (and tf32, logged) and compares the losses
// with fp32's. bf16 runs the autocast matmuls, the blocks' LayerNorms and
// BERT's residual stream in bf16 (precision.h's block_layer_norm) and GPT's
// fused head (linear_ce.h); fp16 runs the same code with 3 more mantissa
// bits, so its deviation from fp32 is the same computation's rounding noise,
// as this GPU and these kernels amplify it, at 1/8 of bf16's unit roundoff
// (2^-11 against 2^-8).
//
// Every bf16 loss within 1% of fp32's (ResNet: the first loss only; its
// later steps are chaotic at every precision: after 6 steps fp32 and tf32
// differ by 10%), fp16's too for GPT and BERT, and bf16 learns. fp16 and tf32
// are the evidence beside bf16: the same code at 1/8 of bf16's unit roundoff,
// and fp32 matmuls at tf32's. A LayerNorm that lost its affine parameters in
// bf16 alone, or a head with the wrong padding, is far off.
//
// BERT tiny's step 1 (the loss after the first update) is held at a tenth of
// its learning rate. At its own (1e-3) bf16's loss there is 1.08% from fp32's
// (seed 11, data_version 2; H100s and the H200 since aaf0371) while fp16 is
// 0.041% off. TestGPUBF16Diagnose found why, on an H100 on 2026-12-06 (23:58 UTC)
// (3f6993f, docs/perf.md): Adam's first update is about lr·sign(g) for every
// parameter, so a tiny gradient whose sign bf16's rounding flips moves a full
// lr the wrong way. The step-1 deviation fell 11x at lr/10 (0.097%), as that
// hypothesis predicted before the run, and stayed at 1.08-1.10% with cuBLAS's
// reduced-precision reductions off and with attention as plain matmuls; from
// step 2 on it is at most 0.64%. So BERT's step 1 at its own learning rate is
// logged, not asserted; at lr/10 it must be within 1%, as every later step at
// the full rate must.
func TestGPUBF16TracksFP32(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, tol = 8, 0.01
	for _, family := range []string{"gpt", "bert", "resnet50"} {
		t.Run(family, func(t *testing.T) {
			run := func(precision string) []float64 {
				cfg := gpuFamily(family, "tiny", precision, false)
				if family == "gpt" {
					cfg = gpuGPT("tiny", precision, false)
				}
				return trainGPU(t, lib, cfg, steps)
			}
			fp32, tf32, fp16, bf16 := run("fp32"), run("tf32"), run("fp16"), run("bf16")
			devs := func(l []float64) (d []float64, worst float64) {
				for i := range l {
					d = append(d, math.Abs(l[i]-fp32[i])/math.Abs(fp32[i]))
					worst = math.Max(worst, d[i])
				}
				return d, worst
			}
			dTF32, _ := devs(tf32)
			dFP16, floor := devs(fp16)
			dBF16, _ := devs(bf16)
			t.Logf("fp32 %v\ntf32 %v\nfp16 %v\nbf16 %v", fp32, tf32, fp16, bf16)
			t.Logf("relative deviation from fp32 per step:\ntf32 %.2g\nfp16 %.2g (largest %.2g)\nbf16 %.2g",
				dTF32, dFP16, floor, dBF16)
			assert.LessOrEqual(t, dBF16[0], tol, "step 0: bf16 %v, fp32 %v", bf16[0], fp32[0])
			if family == "resnet50" {
				return
			}
			for i := range fp32 {
				assert.LessOrEqual(t, dFP16[i], tol, "step %d: fp16 %v, fp32 %v", i, fp16[i], fp32[i])
				if family == "bert" && i == 1 {
					continue // at lr/10 below (Adam's first update: the comment above)
				}
				assert.LessOrEqual(t, dBF16[i], tol, "step %d: bf16 %v, fp32 %v", i, bf16[i], fp32[i])
			}
			assert.Less(t, bf16[steps-1], bf16[0], "bf16 does not learn")
			if family == "bert" {
				slow := func(precision string) []float64 {
					cfg := gpuFamily(family, "tiny", precision, false)
					cfg.LearningRate = 1e-4 // bert tiny's 1e-3 / 10
					return trainGPU(t, lib, cfg, 2)
				}
				f, b := slow("fp32"), slow("bf16")
				d := math.Abs(b[1]-f[1]) / math.Abs(f[1])
				t.Logf("step 1 at lr 1e-4: bf16 %v, fp32 %v, deviation %.2g (at lr 1e-3: %.2g)", b[1], f[1], d, dBF16[1])
				assert.LessOrEqual(t, d, tol, "step 1 at lr 1e-4: bf16 %v, fp32 %v", b[1], f[1])
			}
		})
	}
}

// TestGPUDataParallelOneRank trains GPT tiny as a data-parallel world of one
// over NCCL (dist.backend nccl, world_size 1: the communicator, the comm
// stream, bucketed all-reduces overlapped with the backward pass, the
// watchdog) in its own rank process, and checks it follows the run without a
// world: the losses of 3 steps and the parameter sum within 1e-4 relative (the
// multi-GPU tests' tolerance), with every step's all-reduces reported. With
// bf16 gradient compression the step must still train and report its buckets.
// One GPU cannot hold two NCCL ranks; gpu_multi_test.go covers N GPUs.
func TestGPUDataParallelOneRank(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, tol = 3, 1e-4
	for _, compression := range []string{"none", "bf16"} {
		t.Run("compression "+compression, func(t *testing.T) {
			cfg := multiGPT("tiny", "fp32")
			cfg.DDP.Compression = compression
			var rs []rankResult
			if compression == "none" {
				rs = worldOfOneMatches(t, lib, cfg, steps, tol) // gpu_comm_test.go
			} else {
				rs = runGPURanks(t, lib, cfg, 1, steps)
				got := globalLosses(rs)
				assert.Less(t, got[steps-1], got[0], "losses %v", got)
			}
			for i, m := range rs[0].Metrics {
				assert.Positive(t, m.Collectives, "step %d: no all-reduce", i)
				assert.Len(t, m.Buckets, m.Collectives, "step %d", i)
				assert.Positive(t, m.CommBytes, "step %d", i)
			}
		})
	}
}

// TestGPUPipelineOneStage: with one stage, pipeline.microbatches m on the GPU
// is gradient accumulation over m micro-batches (the trainer folds it into
// grad_accum, as in pipeline.md): the same losses as grad_accum m within
// 1e-5 relative, in fp32 and bf16, and m micro-batches' samples per step.
// Stages on several GPUs (NCCL send/recv) are in gpu_multi_test.go.
func TestGPUPipelineOneStage(t *testing.T) {
	lib := gpuLibrary(t)
	const steps, m, tol = 4, 4, 1e-5
	for _, precision := range []string{"fp32", "bf16"} {
		t.Run(precision, func(t *testing.T) {
			a := gpuGPT("tiny", precision, false)
			a.Pipeline = engine.PipelineConfig{Stages: 1, Microbatches: m, Schedule: "1f1b"}
			b := gpuGPT("tiny", precision, false)
			b.GradAccum = m
			la := trainGPU(t, lib, a, steps)
			lb := trainGPU(t, lib, b, steps)
			for i := range la {
				assert.InEpsilon(t, lb[i], la[i], tol, "step %d", i)
			}
			e, err := lib.Create(a)
			require.NoError(t, err)
			defer func() { assert.NoError(t, e.Close()) }()
			s, err := e.Step()
			require.NoError(t, err)
			assert.Equal(t, a.MicroBatch*m, s.Samples)
		})
	}
}

// TestGPUInterference: the κ calibration's side-stream copy kernel
// (CASESTUDY_INTERFERE=C:B, engine/native/src/cuda/interfere.cu) runs beside
// each backward pass on a GPU, stops with it (the steps finish: the kernel saw
// its stop flag), streams no faster than its pace, and slows the backward pass
// no less than 0% (κ >= 1 within noise) when unpaced on 16 multiprocessors.
func TestGPUInterference(t *testing.T) {
	lib := gpuLibrary(t)
	backward := func(env string) (ms, gbps float64) {
		t.Setenv("CASESTUDY_INTERFERE", env)
		e, err := lib.Create(gpuGPT("124m", "bf16", false))
		require.NoError(t, err)
		defer func() { require.NoError(t, e.Close()) }()
		steps, err := e.Steps(8)
		require.NoError(t, err)
		var b, g []float64
		for _, m := range steps[3:] {
			b, g = append(b, m.BackwardMS), append(g, m.InterfereGBps)
		}
		return median(b), median(g)
	}
	base, none := backward("")
	assert.Zero(t, none)
	paced, pg := backward("8:200")
	loaded, lg := backward("16:0")
	t.Logf("backward %.2f ms alone; %.2f ms beside 8 blocks paced to 200 GB/s (reached %.1f GB/s); %.2f ms beside 16 unpaced blocks (%.1f GB/s): κ %.3f and %.3f",
		base, paced, pg, loaded, lg, paced/base, loaded/base)
	assert.Positive(t, pg, "the paced load streamed beside backward")
	assert.LessOrEqual(t, pg, 1.2*200, "the pace bounds the paced load")
	assert.Positive(t, lg, "the unpaced load streamed beside backward")
	assert.Greater(t, loaded, 0.97*base, "a concurrent copy does not speed backward up")
	// The calibration launch of `run --predict N --kappa auto` on a study with
	// world_of_one (studies/gpt/ddp1-quick.yaml): DDP over NCCL with one rank,
	// its bucket hooks inside the backward pass, the default load of 12 blocks.
	// A wait for the whole device inside the backward would wait for the load,
	// which waits for the backward's end: the load stops at its 2 s deadline and
	// says so, instead of hanging (it hung the first GPU calibration, 2026-12-06).
	rs := runGPURanks(t, lib, multiGPT("124m", "bf16"), 1, 6, "CASESTUDY_INTERFERE=12:675.9")
	for i, m := range rs[0].Metrics {
		assert.Zero(t, m.InterfereTimeouts, "step %d: the load outlived the backward pass (%.1f ms)", i, m.BackwardMS)
		if i < 3 {
			assert.Zero(t, m.InterfereGBps, "step %d: the first three passes load CUDA's kernels without the load", i)
		} else {
			assert.Positive(t, m.InterfereGBps, "step %d", i)
		}
	}
	t.Setenv("CASESTUDY_INTERFERE", "100000")
	_, err := lib.Create(gpuGPT("124m", "bf16", false))
	require.ErrorContains(t, err, "multiprocessors", "more blocks than the GPU has")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
