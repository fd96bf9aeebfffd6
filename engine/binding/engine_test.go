package binding

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the real libcasestudy_engine.so through cgo: the tiny GPT
// trains on the CPU. Without the library they fail under CI=true and are
// skipped, with the reason, elsewhere.

// realLibrary loads the engine library that Discover("") finds.
func realLibrary(t *testing.T) *Library {
	t.Helper()
	path, err := engine.Discover("")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no engine library: %v", err)
		}
		t.Skipf("no engine library (run `make engine`): %v", err)
	}
	lib, err := Load(path)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, lib.Close()) })
	return lib
}

// tinyGPT is the CPU configuration of these tests. One intra-op thread: go
// test runs packages in parallel on CI's two cores, and OpenMP teams that spin
// at barriers on an oversubscribed machine made 50 steps take 30 s instead of
// 1.5 s.
func tinyGPT(precision string) engine.Config {
	return engine.Config{
		Family: "gpt", Preset: "tiny", MicroBatch: 8,
		Device: "cpu", Threads: 1, Precision: precision, GradAccum: 1, Seed: 7,
		Dist: engine.DistConfig{WorldSize: 1},
	}
}

// train creates an engine from cfg, runs steps and returns the losses.
func train(t *testing.T, lib *Library, cfg engine.Config, steps int) ([]float64, *Engine) {
	t.Helper()
	e, err := lib.Create(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Close()) })
	losses := make([]float64, steps)
	for i := range losses {
		m, err := e.Step()
		require.NoError(t, err, "step %d", i)
		require.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "step %d: loss %v", i, m.Loss)
		losses[i] = m.Loss
	}
	return losses, e
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func TestTinyGPTLearns(t *testing.T) {
	lib := realLibrary(t)
	cfg := tinyGPT("fp32")
	cfg.LearningRate = 2e-3
	e, err := lib.Create(cfg)
	require.NoError(t, err)
	defer e.Close()

	info, err := e.Info()
	require.NoError(t, err)
	assert.Equal(t, "gpt", info.Family)
	assert.Equal(t, "cpu", info.Device)
	assert.Positive(t, info.Params)
	seqLen := info.Shapes["seq_len"]
	require.Positive(t, seqLen, "info shapes: %v", info.Shapes)

	const steps = 50
	losses := make([]float64, steps)
	for i := range losses {
		m, err := e.Step()
		require.NoError(t, err, "step %d", i)
		losses[i] = m.Loss
		assert.False(t, math.IsNaN(m.Loss) || math.IsInf(m.Loss, 0), "step %d loss %v", i, m.Loss)
		assert.Positive(t, m.GradNorm, "step %d", i)
		assert.Positive(t, m.StepMS, "step %d", i)
		assert.Equal(t, cfg.MicroBatch, m.Samples, "step %d", i)
		assert.Equal(t, cfg.MicroBatch*seqLen, m.Tokens, "step %d", i)
		assert.Positive(t, m.TokensPerS, "step %d", i)
		assert.Positive(t, m.TFLOPS, "step %d", i)
		assert.False(t, m.Skipped, "step %d", i)
	}
	// The tokens come from a fixed random Markov chain (start ln 256 ≈ 5.55
	// nats, floor 1.13), so a model that learns gets clearly below where it
	// started: the mean of the last five losses at most 75% of the mean of the
	// first five (libtorch 1.13 on CPU gives about 59% at this learning rate).
	first, last := mean(losses[:5]), mean(losses[steps-5:])
	t.Logf("loss: first 5 mean %.4f, last 5 mean %.4f (%.1f%%)", first, last, 100*last/first)
	assert.Less(t, last, 0.75*first, "losses: %v", losses)
}

// TestBF16TracksFP32 trains the same model from the same seed in fp32 and in
// bf16 autocast. Tolerance: the mean loss of steps 16-20 agrees within 0.5%
// relative. bf16 keeps 8 significant bits (a rounding is at most 2^-9 ≈ 0.2%
// relative); autocast runs the matmuls in bf16 but keeps the weights, the
// optimizer and the loss reduction in fp32, so the roundings average out over
// the 512 tokens of a batch: libtorch 1.13 on CPU gives 0.001% after 20 steps.
// 0.5% leaves room for other libtorch and BLAS versions and is still far
// below what a broken path does (fp32 and bf16 drift apart by tenths of a nat
// when either stops training); NotEqual catches autocast doing nothing.
func TestBF16TracksFP32(t *testing.T) {
	lib := realLibrary(t)
	const steps, tol = 20, 0.005
	fp32, _ := train(t, lib, tinyGPT("fp32"), steps)
	bf16, _ := train(t, lib, tinyGPT("bf16"), steps)
	a, b := mean(fp32[steps-5:]), mean(bf16[steps-5:])
	t.Logf("mean loss of the last 5 of %d steps: fp32 %.5f, bf16 %.5f (relative difference %.3f%%)", steps, a, b, 100*math.Abs(a-b)/a)
	assert.InEpsilon(t, a, b, tol, "fp32 %v\nbf16 %v", fp32, bf16)
	assert.NotEqual(t, fp32, bf16, "bf16 gave bitwise the fp32 losses: autocast did nothing")
	assert.Less(t, b, bf16[0], "bf16 did not learn: %v", bf16)
}

// equalParams checks that two engines hold the same parameters and returns
// their checksum.
func equalParams(t *testing.T, a, b *Engine) engine.Checksum {
	t.Helper()
	ca, err := a.Checksum()
	require.NoError(t, err)
	cb, err := b.Checksum()
	require.NoError(t, err)
	assert.Equal(t, ca, cb, "parameters after training")
	return ca
}

func TestSameSeedSameLoss(t *testing.T) {
	lib := realLibrary(t)
	const steps = 5
	cfg := tinyGPT("fp32")
	a, ea := train(t, lib, cfg, steps)
	b, eb := train(t, lib, cfg, steps)
	assert.Equal(t, a, b, "same seed, same config: the CPU losses must be bitwise equal")
	ca := equalParams(t, ea, eb)
	assert.NotEmpty(t, ca.Hash)

	cfg.Seed++
	c, ec := train(t, lib, cfg, steps)
	assert.NotEqual(t, a, c, "another seed gave the same losses")
	cc, err := ec.Checksum()
	require.NoError(t, err)
	assert.NotEqual(t, ca.Hash, cc.Hash)
}

// TestStepsMatchStep: steps issued several a call (cs_steps) train exactly as
// one a call, in order, and a request out of range is a config error.
func TestStepsMatchStep(t *testing.T) {
	lib := realLibrary(t)
	cfg := tinyGPT("fp32")
	one, ea := train(t, lib, cfg, 5)
	eb, err := lib.Create(cfg)
	require.NoError(t, err)
	defer eb.Close()
	var several []float64
	for _, n := range []int{2, 3} {
		ms, err := eb.Steps(n)
		require.NoError(t, err)
		require.Len(t, ms, n)
		for _, m := range ms {
			assert.Equal(t, len(several), m.Step, "steps in order")
			assert.Positive(t, m.StepMS)
			several = append(several, m.Loss)
		}
	}
	assert.Equal(t, one, several, "the CPU losses must be bitwise equal")
	equalParams(t, ea, eb)

	for _, n := range []int{0, 1001, 1 << 33} { // 1 << 33: past int32, not wrapped into range
		_, err := eb.Steps(n)
		require.ErrorIs(t, err, engine.ErrConfig, "steps %d", n)
		assert.Contains(t, err.Error(), "out of range 1..1000")
	}
}

func TestBadConfig(t *testing.T) {
	lib := realLibrary(t)
	tests := []struct {
		description string
		config      func() string // raw JSON to cs_create and cs_describe
		field       string        // the message must name it
	}{
		{"unknown preset", func() string { c := tinyGPT("fp32"); c.Preset = "13b"; return mustJSON(c) }, "preset"},
		{"unknown family", func() string { c := tinyGPT("fp32"); c.Family = "llama"; return mustJSON(c) }, "family"},
		{"negative micro_batch", func() string { c := tinyGPT("fp32"); c.MicroBatch = -4; return mustJSON(c) }, "micro_batch"},
		{"negative seq_len", func() string { c := tinyGPT("fp32"); c.SeqLen = -1; return mustJSON(c) }, "seq_len"},
		{"malformed JSON", func() string { return `{"family": "gpt", "preset": ` }, "JSON"},
		{"a string where a number goes", func() string { return `{"family":"gpt","preset":"tiny","micro_batch":"eight"}` }, "micro_batch"},
		{"unknown pipeline.balance_by", func() string { c := tinyGPT("fp32"); c.Pipeline.BalanceBy = "flops"; return mustJSON(c) }, "pipeline.balance_by"},
		{"balance_by time with a manual balance", func() string {
			c := tinyGPT("fp32")
			c.Pipeline.Stages, c.Pipeline.Balance, c.Pipeline.BalanceBy = 2, []int{2, 2}, "time"
			return mustJSON(c)
		}, "pipeline.balance_by"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			raw := tt.config()
			e, err := lib.createRaw(raw)
			require.Error(t, err)
			assert.Nil(t, e)
			assertConfigError(t, err, "cs_create", tt.field)
			if strings.HasPrefix(tt.field, "pipeline.") {
				return // cs_describe reads the model's fields only
			}

			_, err = lib.describeRaw(raw)
			require.Error(t, err)
			assertConfigError(t, err, "cs_describe", tt.field)
		})
	}
	t.Run("unknown precision", func(t *testing.T) {
		_, err := lib.Create(tinyGPT("fp4"))
		assertConfigError(t, err, "cs_create", "precision")
	})
	t.Run("unknown device", func(t *testing.T) {
		c := tinyGPT("fp32")
		c.Device = "tpu"
		_, err := lib.Create(c)
		assertConfigError(t, err, "cs_create", "device")
	})
	t.Run("the library stays usable", func(t *testing.T) {
		train(t, lib, tinyGPT("fp32"), 1)
	})
}

func mustJSON(c engine.Config) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func assertConfigError(t *testing.T, err error, op, field string) {
	t.Helper()
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, engine.StatusConfig, ee.Status, "%v", err)
	assert.ErrorIs(t, err, engine.ErrConfig)
	assert.Equal(t, op, ee.Op)
	assert.Contains(t, ee.Msg, field)
}

func TestUnsupportedKnobs(t *testing.T) {
	lib := realLibrary(t)
	cfg := tinyGPT("bf16")
	cfg.Graphs = true
	e, err := lib.Create(cfg)
	require.Error(t, err)
	assert.Nil(t, e)
	assert.ErrorIs(t, err, engine.ErrUnsupported)
	assert.Contains(t, err.Error(), "graphs")
}

// TestFP8RefusedOnCPU: precision fp8 needs FP8 tensor cores, so the engine
// refuses it at init on the CPU with the reason (unsupported, not a config
// error: the trial is recorded as such), and for resnet50 (convolutions) on
// any device; a bad fp8.scaling is a config error naming the field.
func TestFP8RefusedOnCPU(t *testing.T) {
	lib := realLibrary(t)
	for _, family := range []string{"gpt", "bert"} {
		cfg := tinyGPT("fp8")
		cfg.Family = family
		cfg.FP8 = &engine.FP8Config{Scaling: "row"}
		e, err := lib.Create(cfg)
		require.Error(t, err, family)
		assert.Nil(t, e)
		assert.ErrorIs(t, err, engine.ErrUnsupported, family)
		assert.Contains(t, err.Error(), "FP8 tensor cores", family)
		assert.Contains(t, err.Error(), "compute capability 8.9", family)
		assert.Contains(t, err.Error(), "device is cpu", family)
	}
	cfg := tinyGPT("fp8")
	cfg.Family = "resnet50"
	_, err := lib.Create(cfg)
	assert.ErrorIs(t, err, engine.ErrUnsupported)
	assert.Contains(t, err.Error(), "resnet50 is convolutions")

	cfg = tinyGPT("fp8")
	cfg.FP8 = &engine.FP8Config{Scaling: "block"}
	_, err = lib.Create(cfg)
	assertConfigError(t, err, "cs_create", "fp8.scaling")
}

func TestFaultKnobs(t *testing.T) {
	lib := realLibrary(t)
	tests := []struct {
		kind   string
		status engine.Status
		is     error
	}{
		{"error", engine.StatusRuntime, engine.ErrRuntime},
		{"oom", engine.StatusOOM, engine.ErrOOM},
	}
	const atStep = 2
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			cfg := tinyGPT("fp32")
			cfg.Fault = engine.FaultConfig{Kind: tt.kind, Rank: 0, AtStep: atStep}
			e, err := lib.Create(cfg)
			require.NoError(t, err)
			defer e.Close()
			var failed error
			ok := 0
			for range 5 {
				if _, err := e.Step(); err != nil {
					failed = err
					break
				}
				ok++
			}
			require.Error(t, failed, "the %q fault never fired", tt.kind)
			assert.ErrorIs(t, failed, tt.is)
			var ee *engine.Error
			require.ErrorAs(t, failed, &ee)
			assert.Equal(t, tt.status, ee.Status)
			assert.Equal(t, "cs_step", ee.Op)
			assert.NotEmpty(t, ee.Msg)
			assert.InDelta(t, atStep, ok, 1, "steps before the fault")
		})
	}
}

// TestInitPhases: cs_create reports its phases, each once and in the order it
// ran them, and they add up to no more than Create took (the rest is the
// binding's thread and the config's parsing).
func TestInitPhases(t *testing.T) {
	lib := glooLibrary(t)
	cfg := tinyGPT("fp32")
	cfg.Dist = engine.DistConfig{WorldSize: 1, Backend: "gloo", StoreAddr: "127.0.0.1", StorePort: freePort(t)}
	start := time.Now()
	e, err := lib.Create(cfg)
	require.NoError(t, err)
	wall := time.Since(start)
	defer e.Close()
	info, err := e.Info()
	require.NoError(t, err)
	var names []string
	sum := 0.0
	for _, p := range info.InitPhases {
		names = append(names, p.Name)
		assert.GreaterOrEqual(t, p.MS, 0.0, p.Name)
		sum += p.MS
	}
	assert.Equal(t, []string{"device_init", "model_build", "optimizer", "data_setup", "comm_init"}, names)
	assert.LessOrEqual(t, sum, float64(wall)/float64(time.Millisecond), "phases %v", info.InitPhases)
	assert.Positive(t, sum)
}

// TestHostOutOfMemory: a real allocation failure of c10's CPU allocator
// ("DefaultCPUAllocator: can't allocate memory ... Cannot allocate memory") is
// StatusOOM, not a runtime error. The first batch of micro-batch 2^50 needs
// 2^58 bytes, more than any x86-64 address space (2^57 with 5-level paging),
// so the allocation fails at once on any machine, whatever its memory
// overcommit policy, without touching memory.
func TestHostOutOfMemory(t *testing.T) {
	lib := realLibrary(t)
	cfg := tinyGPT("fp32")
	cfg.MicroBatch = 1 << 50
	e, err := lib.Create(cfg)
	require.NoError(t, err)
	defer e.Close()
	_, err = e.Step()
	require.Error(t, err)
	assert.ErrorIs(t, err, engine.ErrOOM)
	assert.ErrorContains(t, err, "can't allocate memory")
}

func TestDescribeGPTPresets(t *testing.T) {
	lib := realLibrary(t)
	// Published GPT-2 parameter counts: tied input/output embeddings, 1024
	// learned positions, vocabulary 50257.
	tests := []struct {
		preset string
		params int64
		layers int
		hidden int
	}{
		{"124m", 124_439_808, 12, 768},
		{"350m", 354_823_168, 24, 1024},
		{"774m", 774_030_080, 36, 1280},
		{"1.5b", 1_557_611_200, 48, 1600},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			d, err := lib.Describe(engine.Config{Family: "gpt", Preset: tt.preset, MicroBatch: 1, Device: "cpu", Precision: "fp32"})
			require.NoError(t, err)
			assert.Equal(t, tt.params, d.Params)
			assert.Equal(t, tt.layers, d.Shapes["layers"])
			assert.Equal(t, tt.hidden, d.Shapes["hidden"])
			assert.Equal(t, 1024, d.Shapes["seq_len"])
			assert.Equal(t, 1024, d.TokensPerSample)
			// 6·N per token plus the attention term.
			assert.Greater(t, d.FLOPsPerSample, 6*float64(tt.params)*1024)
		})
	}
}

// TestModelsMatchLibrary: engine.Models, the Go copy of the preset table that
// studies are validated against, is what the library trains (cs_models):
// the same families, each with the same presets in the same order.
func TestModelsMatchLibrary(t *testing.T) {
	lib := realLibrary(t)
	fromLib, err := lib.Models()
	require.NoError(t, err)
	got := map[string][]string{}
	for _, f := range fromLib {
		got[f.Family] = f.Presets
	}
	want := map[string][]string{}
	for _, f := range engine.Models {
		want[f.Family] = f.Presets
	}
	assert.Equal(t, want, got, "engine.Models (engine/models.go) and the library's cs_models differ: change both")
}
