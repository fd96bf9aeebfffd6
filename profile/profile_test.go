package profile

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// TestCategoryCases: the shared fixture, which bench/reference/test_kernels.py
// checks kernels.py against too, so both sides categorise alike.
func TestCategoryCases(t *testing.T) {
	f, err := os.Open("testdata/category_cases.tsv")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, want, ok := strings.Cut(line, "\t")
		require.True(t, ok, "line %q has no tab", line)
		assert.Equal(t, want, Category(name), "category of %q", name)
		n++
	}
	require.NoError(t, sc.Err())
	assert.Greater(t, n, 40)
}

func TestCategoryTable(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Rules() {
		names[r.Name] = true
		assert.NotEmpty(t, r.Why, "category %s says why it is where it is", r.Name)
	}
	for _, c := range []string{PipelineWait, Communication, Optimizer, Attention, Convolution, BatchNorm, LayerNorm,
		Softmax, GEMM, Copy, Reduction, Elementwise, Other} {
		assert.True(t, names[c], "the table has %q", c)
	}
	assert.Equal(t, Other, Rules()[len(Rules())-1].Name, "the catch-all is last")

	_, err := parseRules([]byte(`{"categories":[{"name":"a","pattern":"x"},{"name":"a","pattern":""}]}`))
	assert.ErrorContains(t, err, "twice")
	_, err = parseRules([]byte(`{"categories":[{"name":"a","pattern":"x"}]}`))
	assert.ErrorContains(t, err, "catch-all")
	_, err = parseRules([]byte(`{"categories":[{"name":"a","pattern":"conv(?!ert)"},{"name":"o","pattern":""}]}`))
	assert.Error(t, err, "look-around is not RE2: the table must not use it")
}

// rawCUDA is a synthetic 2-step CUDA profile: per step 6 ms GEMM, 3 ms batch
// norm, 1 ms elementwise and a 2 ms all-reduce, 1.5 ms of it under compute;
// the device is busy 10.5 ms of each step.
func rawCUDA() engine.Profile {
	return engine.Profile{Steps: 2, Device: "cuda", Torch: "2.11.0",
		StepMS: []float64{15, 15}, WallMS: []float64{16, 16}, BusyMS: 21,
		Kernels: []engine.KernelTotal{
			{Name: "nvjet_tst_192x192", Calls: 8, MS: 12},
			{Name: "void at::native::batch_norm_collect_statistics_kernel", Calls: 20, MS: 6},
			{Name: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", Calls: 4, MS: 4, OverlapMS: 3},
			{Name: "void at::native::vectorized_elementwise_kernel<4, AddFunctor>", Calls: 40, MS: 2},
		},
		ProfileMS: 40, AnalysisMS: 2, TraceMS: 8, TraceFormat: "kineto", TraceBytes: 1234}
}

func TestSummarizeCUDA(t *testing.T) {
	measured := []engine.StepMetrics{{StepMS: 12}, {StepMS: 14}, {StepMS: 13}}
	s := Summarize(rawCUDA(), measured)
	assert.True(t, s.OK())
	assert.Equal(t, "CUDA kernel time", s.Time)
	assert.InDelta(t, 13, s.StepMS, 1e-9, "median of the measured steps")
	assert.InDelta(t, 15, s.ProfiledStepMS, 1e-9)
	assert.InDelta(t, 15.0/13-1, s.OverheadShare, 1e-9)
	assert.InDelta(t, 50, s.ExtraWallMS, 1e-9)
	assert.InDelta(t, 10.5, s.BusyMS, 1e-9)
	assert.Equal(t, "measured", s.IdleOf, "on CUDA the idle time is judged against the unprofiled steps")
	assert.InDelta(t, 2.5, s.IdleMS, 1e-9)
	assert.InDelta(t, 2.5/13, s.IdleShare, 1e-9)
	assert.InDelta(t, 12, s.KernelMS, 1e-9)
	assert.InDelta(t, 36, s.KernelsPerStep, 1e-9)
	assert.InDelta(t, 2, s.CommMS, 1e-9)
	assert.InDelta(t, 1.5, s.CommOverlapMS, 1e-9)
	assert.InDelta(t, 0.5, s.ExposedCommMS, 1e-9)
	require.Len(t, s.Categories, 4)
	assert.Equal(t, GEMM, s.Categories[0].Category, "largest first")
	assert.InDelta(t, 0.5, s.Share(GEMM), 1e-9)
	assert.InDelta(t, 3, s.MS(BatchNorm), 1e-9)
	assert.InDelta(t, 0.25, s.Categories[1].Share, 1e-9)
	assert.InDelta(t, 10, s.Categories[1].Calls, 1e-9)
	require.Len(t, s.Top, 4)
	assert.Equal(t, "nvjet_tst_192x192", s.Top[0].Name)
	assert.Equal(t, Communication, s.Top[2].Category)
	assert.Zero(t, s.MS(Attention))
}

func TestSummarizeCPUJudgesIdleAgainstTheProfiledSteps(t *testing.T) {
	p := engine.Profile{Steps: 1, Device: "cpu", StepMS: []float64{20}, BusyMS: 18,
		Kernels: []engine.KernelTotal{{Name: "aten::addmm", Calls: 3, MS: 15}, {Name: "aten::gelu", Calls: 3, MS: 3}}}
	s := Summarize(p, []engine.StepMetrics{{StepMS: 10}})
	assert.Equal(t, "CPU operator self time", s.Time)
	assert.Equal(t, "profiled", s.IdleOf, "the profiler stretches CPU operators: the profiled step is the base")
	assert.InDelta(t, 2, s.IdleMS, 1e-9)
	assert.InDelta(t, 0.1, s.IdleShare, 1e-9)
	assert.InDelta(t, 1, s.OverheadShare, 1e-9)
}

func TestSummarizeCutsTopKernelsAndNames(t *testing.T) {
	p := engine.Profile{Steps: 1, Device: "cuda", StepMS: []float64{1}, BusyMS: 1}
	for i := 0; i < 20; i++ {
		p.Kernels = append(p.Kernels, engine.KernelTotal{Name: strings.Repeat("x", 300) + string(rune('a'+i)), Calls: 1, MS: float64(i + 1)})
	}
	s := Summarize(p, nil)
	assert.Len(t, s.Top, TopKernels)
	assert.Equal(t, 20, s.DistinctKernels)
	assert.LessOrEqual(t, len([]rune(s.Top[0].Name)), NameMax)
	assert.Equal(t, "profiled", s.IdleOf, "no measured steps: the profiled ones are the base")
}

func TestMean(t *testing.T) {
	a := Summarize(rawCUDA(), []engine.StepMetrics{{StepMS: 13}})
	raw := rawCUDA()
	raw.BusyMS = 25 // 12.5 per step: no idle against a 12.5 ms step
	b := Summarize(raw, []engine.StepMetrics{{StepMS: 12.5}})
	m := Mean([]*Summary{a, nil, Failed(errors.New("no cs_profile")), b})
	require.NotNil(t, m)
	assert.Equal(t, 2, m.Launches)
	assert.Equal(t, 4, m.Steps)
	assert.InDelta(t, 12.75, m.StepMS, 1e-9)
	assert.InDelta(t, 11.5, m.BusyMS, 1e-9)
	assert.InDelta(t, 1.25, m.IdleMS, 1e-9)
	assert.InDelta(t, 0.5, m.Share(GEMM), 1e-9)
	assert.InDelta(t, 0.5, m.ExposedCommMS, 1e-9)
	assert.Nil(t, Mean([]*Summary{nil, Failed(errors.New("x"))}))
	one := Mean([]*Summary{a})
	assert.Equal(t, 1, one.Launches)
	assert.Equal(t, a.IdleMS, one.IdleMS)
}
