package binding

import (
	"fmt"
	"math"
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the bert and resnet50 families through the real engine library
// (realLibrary, train and mean are in engine_test.go): the tiny presets train
// on the CPU, the full presets' parameter counts and FLOPs come from
// cs_describe without building anything.

func tinyBERT() engine.Config {
	return engine.Config{
		Family: "bert", Preset: "tiny", MicroBatch: 8, SeqLen: 128, LearningRate: 1e-3,
		Device: "cpu", Threads: 2, Precision: "fp32", GradAccum: 1, Seed: 11,
		Dist: engine.DistConfig{WorldSize: 1},
	}
}

// tinyResNet's seed: with micro-batch 8 the losses are noisy. Surveyed over
// seeds 1-12 (2026-12-06, CPU, per-row keyed data, data_version 2): the
// last-5/first-5 ratio over 30 steps has median 0.48 (0.34-0.66, only seed
// 11 above 0.6; the generator before: median 0.47, 0.28-0.61); seed 12 gives
// 0.53, and 11, the seed before, now fails TestTinyFamiliesLearn's 0.6. (A
// single-step comparison, "loss at step 5 below step 0", holds for only 5 of
// the 12 seeds: no test asks it any more.)
func tinyResNet() engine.Config {
	return engine.Config{
		Family: "resnet50", Preset: "tiny", MicroBatch: 8,
		Device: "cpu", Threads: 2, Precision: "fp32", GradAccum: 1, Seed: 12,
		Dist: engine.DistConfig{WorldSize: 1},
	}
}

// bertForwardFLOPs is docs/models.md's formula: per layer 2T(4H²+2HI) for the
// dense layers and 4T²H for attention, 2H²+4H for pooler and NSP, and the MLM
// head (2H²+2HV) on the k = round(0.15T) masked positions.
func bertForwardFLOPs(layers, h, inter, vocab, t int) float64 {
	H, I, V, T := float64(h), float64(inter), float64(vocab), float64(t)
	k := math.Max(1, math.Round(0.15*T))
	layer := 2*T*(4*H*H+2*H*I) + 4*T*T*H
	return float64(layers)*layer + 2*H*H + 4*H + k*(2*H*H+2*H*V)
}

func TestFamilyDescribe(t *testing.T) {
	lib := realLibrary(t)
	tests := []struct {
		description string
		cfg         engine.Config
		params      int64   // Hugging Face BertForPreTraining / torchvision resnet50
		flops       float64 // training FLOPs per sample
		tokens      int
	}{
		{"resnet50 50 at 224 (torchvision: 4.09 G MACs forward)",
			engine.Config{Family: "resnet50", Preset: "50", MicroBatch: 256}, 25_557_032, 3 * 2 * 4.09e9, 0},
		{"bert base seq 128", engine.Config{Family: "bert", Preset: "base", MicroBatch: 32, SeqLen: 128},
			110_106_428, 3 * bertForwardFLOPs(12, 768, 3072, 30522, 128), 128},
		{"bert large seq 128", engine.Config{Family: "bert", Preset: "large", MicroBatch: 32, SeqLen: 128},
			336_226_108, 3 * bertForwardFLOPs(24, 1024, 4096, 30522, 128), 128},
		{"bert large seq 512", engine.Config{Family: "bert", Preset: "large", MicroBatch: 32, SeqLen: 512},
			336_226_108, 3 * bertForwardFLOPs(24, 1024, 4096, 30522, 512), 512},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			d, err := lib.Describe(tt.cfg)
			require.NoError(t, err)
			assert.Equal(t, tt.cfg.Family, d.Family)
			assert.Equal(t, tt.params, d.Params)
			assert.InEpsilon(t, tt.flops, d.FLOPsPerSample, 1e-3)
			assert.Equal(t, tt.tokens, d.TokensPerSample)
		})
	}

	t.Run("resnet50 FLOPs scale with image_size", func(t *testing.T) {
		at224, err := lib.Describe(engine.Config{Family: "resnet50", Preset: "50", MicroBatch: 2})
		require.NoError(t, err)
		assert.Equal(t, 224, at224.Shapes["image_size"], "default image size")
		at448, err := lib.Describe(engine.Config{Family: "resnet50", Preset: "50", MicroBatch: 2, ImageSize: 448})
		require.NoError(t, err)
		// Every feature map doubles per side; only the fc stays: just under 4x.
		assert.InEpsilon(t, 4.0, at448.FLOPsPerSample/at224.FLOPsPerSample, 1e-3)
		assert.Equal(t, at224.Params, at448.Params)
	})
}

// The tiny presets learn their synthetic data: the mean of the last five of
// 30 losses is clearly below the mean of the first five.
func TestTinyFamiliesLearn(t *testing.T) {
	lib := realLibrary(t)
	tests := []struct {
		description string
		cfg         engine.Config
		maxRatio    float64 // last-5 mean / first-5 mean at most this
	}{
		// MLM+NSP starts near ln(1024)+ln(2) = 7.6; the Markov chain's Zipf
		// unigrams and successor structure bring it to about 5 in 30 steps.
		{"bert tiny", tinyBERT(), 0.85},
		// 10 classes, ln(10) = 2.3 at the start; the class patterns are easy.
		{"resnet50 tiny", tinyResNet(), 0.6},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			const steps = 30
			e, err := lib.Create(tt.cfg)
			require.NoError(t, err)
			defer e.Close()
			info, err := e.Info()
			require.NoError(t, err)
			assert.NotEmpty(t, info.Optimizer)
			assert.NotEmpty(t, info.Attention)
			losses := make([]float64, steps)
			for i := range losses {
				m, err := e.Step()
				require.NoError(t, err, "step %d", i)
				require.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "step %d: loss %v", i, m.Loss)
				losses[i] = m.Loss
				assert.Equal(t, tt.cfg.MicroBatch, m.Samples, "step %d", i)
				assert.Equal(t, tt.cfg.MicroBatch*info.TokensPerSample, m.Tokens, "step %d", i)
				assert.Positive(t, m.TFLOPS, "step %d", i)
			}
			first, last := mean(losses[:5]), mean(losses[steps-5:])
			t.Logf("loss: first 5 mean %.4f, last 5 mean %.4f (%.1f%%)", first, last, 100*last/first)
			assert.Less(t, last, tt.maxRatio*first, "losses: %v", losses)
		})
	}
}

// Activation checkpointing recomputes each block in backward: same seed, same
// losses, same parameters. On the CPU in fp32 the recomputation runs the same
// kernels on the same inputs, so the losses agree to float32 rounding; the
// tolerance, 1e-5 relative, allows for a differently ordered gradient
// accumulation. Measured over seeds 1-12 (2026-12-06, data_version 2): every
// loss of both families agreed bit for bit. The parameters after the steps
// agree too (their sum to 1e-6): the updates, made from the recomputed
// gradients, are the plain run's. (This test asked before that the
// checkpointed loss at step 5 be below step 0's; for the tiny ResNet at
// micro-batch 8 that held for 5 of those 12 seeds, with or without
// checkpointing alike: batch-to-batch noise, not a property of checkpointing.
// That the configuration learns is TestTinyFamiliesLearn's question, over 30
// steps; the C++ suite "checkpoint" compares gradients and BatchNorm's
// running statistics directly.)
func TestActivationCheckpointingSameLoss(t *testing.T) {
	lib := realLibrary(t)
	for _, base := range []engine.Config{tinyBERT(), tinyResNet()} {
		t.Run(base.Family, func(t *testing.T) {
			const steps = 6
			plain, pe := train(t, lib, base, steps)
			ckpt := base
			ckpt.ActivationCheckpointing = true
			recomputed, ce := train(t, lib, ckpt, steps)
			for i := range plain {
				assert.InEpsilon(t, plain[i], recomputed[i], 1e-5, "step %d: %v vs %v", i, plain, recomputed)
			}
			ps, err := pe.Checksum()
			require.NoError(t, err)
			cs, err := ce.Checksum()
			require.NoError(t, err)
			assert.InEpsilon(t, ps.Sum, cs.Sum, 1e-6, "parameter sum after %d steps, without and with checkpointing", steps)
		})
	}
}

// channels_last changes the memory layout only: ResNet still learns, and its
// first loss (same weights, same batch) equals the default layout's.
func TestResNetChannelsLast(t *testing.T) {
	lib := realLibrary(t)
	const steps = 30
	cfg := tinyResNet()
	plain, _ := train(t, lib, cfg, 1)
	cfg.ChannelsLast = true
	losses, _ := train(t, lib, cfg, steps)
	assert.InEpsilon(t, plain[0], losses[0], 1e-4, "first loss, NCHW vs channels_last")
	assert.Less(t, mean(losses[steps-5:]), 0.6*mean(losses[:5]), "losses: %v", losses)
}

// TestCudnnTuningSwitch: CASESTUDY_CUDNN_BENCHMARK_LIMIT (read at every
// cs_create) reaches cs_info for ResNet, which has convolutions, and not for
// GPT; a bad value is a config error naming the variable. On the CPU the
// setting changes nothing else (cuDNN is CUDA's); the H200 times it
// (gpu-check.sh stage cudnn).
func TestCudnnTuningSwitch(t *testing.T) {
	lib := realLibrary(t)
	for _, v := range []struct{ env, want string }{
		{"", "benchmark, limit 10"}, {"3", "benchmark, limit 3"}, {" 1 ", "benchmark, limit 1"},
		{"0", "benchmark, every algorithm"}, {"off", "heuristics"},
	} {
		t.Run("value "+v.env, func(t *testing.T) {
			t.Setenv("CASESTUDY_CUDNN_BENCHMARK_LIMIT", v.env)
			e, err := lib.Create(tinyResNet())
			require.NoError(t, err)
			defer e.Close()
			info, err := e.Info()
			require.NoError(t, err)
			assert.Equal(t, v.want, info.CuDNN)
			_, err = e.Step()
			require.NoError(t, err)
		})
	}
	t.Run("not for gpt", func(t *testing.T) {
		t.Setenv("CASESTUDY_CUDNN_BENCHMARK_LIMIT", "2")
		e, err := lib.Create(tinyGPT("fp32"))
		require.NoError(t, err)
		defer e.Close()
		info, err := e.Info()
		require.NoError(t, err)
		assert.Empty(t, info.CuDNN)
	})
	for _, bad := range []string{"ten", "-1", "1001", "2.5", "on"} {
		t.Run("bad "+bad, func(t *testing.T) {
			t.Setenv("CASESTUDY_CUDNN_BENCHMARK_LIMIT", bad)
			_, err := lib.Create(tinyResNet())
			assertConfigError(t, err, "cs_create", "CASESTUDY_CUDNN_BENCHMARK_LIMIT")
		})
	}
}

func TestFamilyBadConfig(t *testing.T) {
	lib := realLibrary(t)
	with := func(c engine.Config, f func(*engine.Config)) engine.Config { f(&c); return c }
	tests := []struct {
		description string
		cfg         engine.Config
		field       string // the message must name it
	}{
		{"bert seq_len above 512 positions", with(tinyBERT(), func(c *engine.Config) { c.SeqLen = 1000 }), "seq_len"},
		{"bert seq_len too short for a sentence pair", with(tinyBERT(), func(c *engine.Config) { c.SeqLen = 4 }), "seq_len"},
		{"bert unknown preset", with(tinyBERT(), func(c *engine.Config) { c.Preset = "huge" }), "preset"},
		{"bert hidden not a multiple of heads", with(tinyBERT(), func(c *engine.Config) { c.Hidden = 100; c.Preset = "base" }), "hidden"},
		{"bert channels_last", with(tinyBERT(), func(c *engine.Config) { c.ChannelsLast = true }), "channels_last"},
		{"bert image_size", with(tinyBERT(), func(c *engine.Config) { c.ImageSize = 224 }), "image_size"},
		{"resnet50 image_size 7", with(tinyResNet(), func(c *engine.Config) { c.ImageSize = 7 }), "image_size"},
		{"resnet50 unknown preset", with(tinyResNet(), func(c *engine.Config) { c.Preset = "101" }), "preset"},
		{"resnet50 seq_len", with(tinyResNet(), func(c *engine.Config) { c.SeqLen = 128 }), "seq_len"},
		{"resnet50 one value per BatchNorm channel", with(tinyResNet(), func(c *engine.Config) { c.MicroBatch = 1 }), "micro_batch"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			_, err := lib.Describe(tt.cfg)
			require.Error(t, err)
			assertConfigError(t, err, "cs_describe", tt.field)
			e, err := lib.Create(tt.cfg)
			require.Error(t, err)
			assert.Nil(t, e)
			assertConfigError(t, err, "cs_create", tt.field)
		})
	}
}

// resnet.fusion cudnn through the C ABI on the CPU: refused at cs_create as a
// config error naming the field and saying why (device cpu; bf16), while
// cs_describe, which checks the model alone, takes it; an unknown value is
// refused by both.
func TestResNetFusionRefusedOnCPU(t *testing.T) {
	lib := realLibrary(t)
	cfg := tinyResNet()
	cfg.Precision, cfg.ChannelsLast = "fp16", true
	cfg.ResNet = &engine.ResNetConfig{Fusion: "cudnn"}
	_, err := lib.Describe(cfg)
	require.NoError(t, err)
	e, err := lib.Create(cfg)
	require.Error(t, err)
	assert.Nil(t, e)
	assertConfigError(t, err, "cs_create", "resnet.fusion cudnn: runs cuDNN's fused convolutions on CUDA only")
	cfg.Device, cfg.Precision = "cuda", "bf16"
	_, err = lib.Create(cfg)
	require.Error(t, err)
	assertConfigError(t, err, "cs_create", "cuDNN's ConvBNfprop takes fp16 only on the H100 (docs/resnet-fusion.md)")
	cfg.ResNet.Fusion = "fused"
	_, err = lib.Describe(cfg)
	require.Error(t, err)
	assertConfigError(t, err, "cs_describe", "resnet.fusion")
}

// The trainer's knobs work with both families on the CPU: bf16 autocast and
// gradient accumulation (two micro-batches per step) train with finite losses
// that track fp32 (first loss within 2%: same weights and batch, bf16 matmuls).
func TestFamilyKnobs(t *testing.T) {
	lib := realLibrary(t)
	for _, base := range []engine.Config{tinyBERT(), tinyResNet()} {
		t.Run(base.Family, func(t *testing.T) {
			const steps = 4
			fp32, _ := train(t, lib, base, steps)
			bf16 := base
			bf16.Precision = "bf16"
			lb, _ := train(t, lib, bf16, steps)
			assert.InEpsilon(t, fp32[0], lb[0], 0.02, "fp32 %v\nbf16 %v", fp32, lb)
			assert.NotEqual(t, fp32, lb, "bf16 gave bitwise the fp32 losses: autocast did nothing")

			accum := base
			accum.GradAccum = 2
			e, err := lib.Create(accum)
			require.NoError(t, err)
			defer e.Close()
			m, err := e.Step()
			require.NoError(t, err)
			assert.Equal(t, 2*base.MicroBatch, m.Samples)
			assert.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "loss %v", m.Loss)
		})
	}
}

// gpuFamily is a CUDA configuration of the benchmark shapes (docs/perf.md):
// BERT micro-batch 32 at 128 tokens, ResNet-50 micro-batch 256 at 224 pixels
// channels_last; the tiny presets at their CPU shapes.
func gpuFamily(family, preset, precision string, graphs bool) engine.Config {
	c := engine.Config{
		Family: family, Preset: preset, MicroBatch: 8, Device: "cuda", Precision: precision,
		Graphs: graphs, GradAccum: 1, Seed: 11, Dist: engine.DistConfig{WorldSize: 1},
	}
	switch {
	case family == "bert" && preset == "tiny":
		c.LearningRate = 1e-3
	case family == "bert":
		c.MicroBatch, c.SeqLen = 32, 128
	case family == "resnet50" && preset == "50":
		c.MicroBatch, c.ChannelsLast = 256, true
	}
	return c
}

// TestGPUFamilySteps: the tiny BERT and ResNet in every precision and as a
// CUDA graph (trainGPU checks the metrics and that graph mode replays).
func TestGPUFamilySteps(t *testing.T) {
	lib := gpuLibrary(t)
	for _, family := range []string{"bert", "resnet50"} {
		for _, v := range gpuPrecisions {
			t.Run(fmt.Sprintf("%s-tiny/%s/graphs=%v", family, v.precision, v.graphs), func(t *testing.T) {
				trainGPU(t, lib, gpuFamily(family, "tiny", v.precision, v.graphs), 6)
			})
		}
	}
}

// TestGPUResNetFusion: resnet.fusion cudnn (docs/resnet-fusion.md) on the tiny
// ResNet in fp16, channels_last: eager and replayed as a CUDA graph from one
// seed agree as TestGPUFamilyGraphsMatchEager's runs do (the fused plans are
// built in the eager warm-up steps, none inside the capture), and in bf16 the
// engine refuses the knob with the reason. The fused block against the
// unfused one is cs_native_tests resnet_fusion.
func TestGPUResNetFusion(t *testing.T) {
	lib := gpuLibrary(t)
	cfg := gpuFamily("resnet50", "tiny", "fp16", false)
	cfg.ChannelsLast = true
	cfg.ResNet = &engine.ResNetConfig{Fusion: "cudnn"}
	graphsMatchEager(t, lib, cfg, 8, 0.01)
	cfg.Precision = "bf16"
	_, err := lib.Create(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "takes fp16 only on the H100")
}

// TestGPUFamilyGraphsMatchEager: each preset from the same seed, eager and
// replayed as a CUDA graph, in bf16: the tiny ones for 8 steps, BERT-large and
// ResNet-50 at the benchmark shapes for 5 (two replays). Tolerance 1% relative
// per step (reduction-order differences in bf16 kernels, BatchNorm statistics
// in ResNet); stale inputs or a skipped optimizer step would be far off.
func TestGPUFamilyGraphsMatchEager(t *testing.T) {
	lib := gpuLibrary(t)
	const tol = 0.01
	for _, v := range []struct {
		family, preset string
		steps          int
	}{{"bert", "tiny", 8}, {"resnet50", "tiny", 8}, {"bert", "large", 5}, {"resnet50", "50", 5}} {
		t.Run(v.family+"-"+v.preset, func(t *testing.T) {
			graphsMatchEager(t, lib, gpuFamily(v.family, v.preset, "bf16", false), v.steps, tol)
		})
	}
}
