package binding

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUBF16Diagnose is a diagnostic, run only when asked for
// (CASESTUDY_GPU_TESTS=1 CASESTUDY_BF16_DIAGNOSE=1, -run TestGPUBF16Diagnose):
// why bf16's loss leaves fp32's by about 1% at step 1 for bert tiny
// (TestGPUBF16TracksFP32/bert, 1.02-1.08% on H100s and the H200) while fp16
// stays within 0.04% and gpt tiny within 4e-5. One call prints, per variant,
// the relative deviation of fp16's and bf16's losses from fp32's per step,
// each variant's three runs under the same switches:
//
//   - baseline: as TestGPUBF16TracksFP32;
//   - reduction: CASESTUDY_BF16_REDUCED_REDUCTION=0, cuBLAS's bf16 GEMMs
//     without reduced-precision (bf16) split-K reductions (hypothesis b);
//   - attention: CASESTUDY_ATTENTION=math, attention as matmul, softmax,
//     matmul instead of SDPA's fused kernels (hypothesis c);
//   - both switches;
//   - lr/10: the learning rate 1e-4 instead of bert tiny's 1e-3. Adam's first
//     update is about lr·sign(g) for every parameter whatever its gradient's
//     size, so a tiny gradient whose sign bf16's rounding flips moves a full
//     lr the wrong way; the loss after it (step 1) then deviates in
//     proportion to lr, and later steps, whose updates are averaged, come
//     back (hypothesis a). Under (a) the step-1 deviation falls about 10x here
//     and not under the switches.
//
// Asserted: every run finite and learning, the attention switch reported by
// the engine (Info.Attention "math"). The verdicts are printed, for the
// person who runs it: which variant takes step 1 under 1%, and the criterion
// proposed for TestGPUBF16TracksFP32 if (a) holds (bf16 within 1% from step 2
// on, and at step 1 within 1% at lr/10).
func TestGPUBF16Diagnose(t *testing.T) {
	if os.Getenv("CASESTUDY_BF16_DIAGNOSE") != "1" {
		t.Skip("diagnostic: set CASESTUDY_BF16_DIAGNOSE=1 (and CASESTUDY_GPU_TESTS=1) to run it")
	}
	lib := gpuLibrary(t)
	const steps = 8
	type variant struct {
		name string
		env  map[string]string
		lr   float64 // 0: the preset's
	}
	variants := []variant{
		{"baseline", nil, 0},
		{"reduction", map[string]string{"CASESTUDY_BF16_REDUCED_REDUCTION": "0"}, 0},
		{"attention", map[string]string{"CASESTUDY_ATTENTION": "math"}, 0},
		{"both", map[string]string{"CASESTUDY_BF16_REDUCED_REDUCTION": "0", "CASESTUDY_ATTENTION": "math"}, 0},
		{"lr/10", nil, 1e-4},
	}
	step1 := map[string]float64{}
	later := map[string]float64{}
	var report strings.Builder
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for k, val := range v.env {
				t.Setenv(k, val)
			}
			run := func(precision string) []float64 {
				cfg := gpuFamily("bert", "tiny", precision, false)
				if v.lr != 0 {
					cfg.LearningRate = v.lr
				}
				if v.env["CASESTUDY_ATTENTION"] == "math" {
					e, err := lib.Create(cfg)
					require.NoError(t, err)
					info, err := e.Info()
					require.NoError(t, err)
					assert.Equal(t, "math", info.Attention, "CASESTUDY_ATTENTION=math not applied")
					require.NoError(t, e.Close())
				}
				return trainGPU(t, lib, cfg, steps)
			}
			fp32, fp16, bf16 := run("fp32"), run("fp16"), run("bf16")
			dev := func(l []float64) []float64 {
				d := make([]float64, len(l))
				for i := range l {
					d[i] = math.Abs(l[i]-fp32[i]) / math.Abs(fp32[i])
				}
				return d
			}
			d16, db := dev(fp16), dev(bf16)
			for _, l := range [][]float64{fp32, fp16, bf16} {
				assert.Less(t, l[steps-1], l[0], "does not learn: %v", l)
			}
			step1[v.name] = db[1]
			for _, d := range db[2:] {
				later[v.name] = math.Max(later[v.name], d)
			}
			fmt.Fprintf(&report, "%-10s fp16 %.2g\n%-10s bf16 %.2g (step 1 %.3g%%, steps 2+ at most %.3g%%)\n",
				v.name, d16, "", db, 100*db[1], 100*later[v.name])
		})
	}
	t.Logf("bert tiny, relative deviation of the loss from fp32's per step:\n%s", report.String())
	for _, v := range variants {
		if s, ok := step1[v.name]; ok {
			t.Logf("verdict %s: bf16 step 1 %.3g%% (baseline %.3g%%): %s", v.name, 100*s, 100*step1["baseline"],
				map[bool]string{true: "under the 1% bar", false: "over the 1% bar"}[s <= 0.01])
		}
	}
	if s, ok := step1["lr/10"]; ok {
		t.Logf("proposed criterion if (a): bf16 from step 2 on within 1%% (%.3g%%) and step 1 at lr/10 within 1%% (%.3g%%): %v",
			100*later["baseline"], 100*s, later["baseline"] <= 0.01 && s <= 0.01)
	}
}

// TestDiagnosticEnvSwitches: the diagnostic switches TestGPUBF16Diagnose sets
// are read at create: a value outside their choices is a config error naming
// the variable; the valid ones train, attention then reported as "math".
func TestDiagnosticEnvSwitches(t *testing.T) {
	lib := realLibrary(t)
	for _, name := range []string{"CASESTUDY_ATTENTION", "CASESTUDY_BF16_REDUCED_REDUCTION"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "bogus")
			_, err := lib.Create(tinyGPT("fp32"))
			assertConfigError(t, err, "cs_create", name)
		})
	}
	plain, err := lib.Create(tinyGPT("bf16"))
	require.NoError(t, err)
	before, err := plain.Info()
	require.NoError(t, err)
	plain.Close()
	t.Setenv("CASESTUDY_ATTENTION", "math")
	t.Setenv("CASESTUDY_BF16_REDUCED_REDUCTION", "0")
	losses, e := train(t, lib, tinyGPT("bf16"), 3)
	assert.Less(t, losses[2], losses[0], "losses %v", losses)
	info, err := e.Info()
	require.NoError(t, err)
	assert.Equal(t, "math", info.Attention)
	if before.Attention == "math" { // a libtorch without SDPA (Debian's 1.13): the switch cannot show here
		t.Logf("attention is %q without the switch on this build: the switch's effect is checked where SDPA exists", before.Attention)
	}
}
