package checklist

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/store"
)

// kernelOf is a real kernel name of each category (profile/testdata has more).
var kernelOf = map[string]string{
	profile.GEMM:          "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NNT",
	profile.Convolution:   "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc",
	profile.BatchNorm:     "void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var>",
	profile.LayerNorm:     "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
	profile.Elementwise:   "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
	profile.Reduction:     "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
	profile.Copy:          "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
	profile.Communication: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
}

// gpuProfile is a synthetic profile of a CUDA step measured at stepMS, the
// device busy busyMS of it, with kernel ms per category (overlap: the
// communication kernels' time under compute), through profile.Summarize as
// the worker makes it.
func gpuProfile(stepMS, busyMS float64, cats map[string]float64, overlap float64, names ...string) *profile.Summary {
	raw := engine.Profile{Steps: 1, Device: "cuda", StepMS: []float64{stepMS * 1.02}, BusyMS: busyMS}
	for c, ms := range cats {
		name := kernelOf[c]
		for _, n := range names { // a name of this category replaces the default
			if profile.Category(n) == c {
				name = n
			}
		}
		k := engine.KernelTotal{Name: name, Calls: 10, MS: ms}
		if c == profile.Communication {
			k.OverlapMS = overlap
		}
		raw.Kernels = append(raw.Kernels, k)
	}
	return profile.Summarize(raw, []engine.StepMetrics{{StepMS: stepMS}})
}

func TestProfileLaunchBound(t *testing.T) {
	gpu := onGPUs(1, "NVIDIA H200", 141<<30, 0, "")
	eager := spec{id: "eager", thr: 640, stepMS: 50, prof: gpuProfile(50, 26, map[string]float64{profile.GEMM: 20, profile.Elementwise: 6}, 0)}
	graphed := spec{id: "graph", set: set("graphs", "true"), thr: 1255, stepMS: 25.5,
		prof: gpuProfile(25.5, 24.7, map[string]float64{profile.GEMM: 19, profile.Elementwise: 5.7}, 0)}
	cpuProf := profile.Summarize(engine.Profile{Steps: 1, Device: "cpu", StepMS: []float64{10}, BusyMS: 5,
		Kernels: []engine.KernelTotal{{Name: "aten::addmm", Calls: 1, MS: 5}}}, nil)
	runCases(t, "profile-launch-bound", []ruleCase{
		{name: "BERT-128 eager idles half its step", status: Finding, severity: Warning,
			run: mkRun([]spec{eager, graphed}, gpu),
			contains: []string{"idled 48.0% of trial eager's 50 ms step", "busy 26 ms", "graphs=true): GPU idle 3.14% with graphs",
				"use graphs: true (trial graph: 1.96× [", "faster by more than 5% against eager eager)", "micro_batch"},
			trials: []string{"eager"}},
		// bert-profile on the H100: one launch a trial, so the graphed twin's
		// verdict is undecided: say it, do not recommend graphs: true.
		{name: "graphed twin measured but undecided", status: Finding,
			run: oneLaunch(mkRun([]spec{eager, {id: "graph", set: set("graphs", "true"), thr: 760, stepMS: 42,
				prof: gpuProfile(42, 38, map[string]float64{profile.GEMM: 30, profile.Elementwise: 8}, 0)}}, gpu)),
			contains: []string{"graph (graphs=true): GPU idle 9.52% with graphs (step 42 ms); against eager: 1.19× undecided (one launch: estimate only)",
				"graphs: true was measured and not decided faster by more than 5% (trial graph against eager: 1.19× undecided"},
			absent: []string{"use graphs: true", "capture the step"}, trials: []string{"eager", "graph"}},
		{name: "no graphed twin: measure it", status: Finding,
			run: mkRun([]spec{eager}, gpu), contains: []string{"sweep graphs: [false, true]"}, absent: []string{"use graphs: true"}},
		{name: "graphed step keeps the GPU busy", status: Pass,
			run: mkRun([]spec{graphed}, gpu), contains: []string{"at most 3.14%", "below 20.0%"}},
		{name: "a study may accept more idle time", status: Pass,
			run: mkRun([]spec{eager}, gpu), cfg: Config{Thresholds: map[string]map[string]float64{"profile-launch-bound": {"max_idle_share": 0.5}}}},
		{name: "graphed and still idle", status: Finding,
			run:      mkRun([]spec{{id: "g", set: set("graphs", "true"), thr: 100, stepMS: 10, prof: gpuProfile(10, 5, map[string]float64{profile.GEMM: 5}, 0)}}, gpu),
			contains: []string{"graphed already", "micro_batch"}},
		{name: "no profiles", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10}}, gpu),
			contains: []string{"--profile 3"}},
		{name: "CPU profiles", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10, prof: cpuProf}}),
			contains: []string{"CUDA device"}},
	})
}

func TestProfileNormalisation(t *testing.T) {
	gpu := onGPUs(1, "NVIDIA H200", 141<<30, 0, "")
	// ResNet-50 on the H200: bf16 spends 45% of its kernel time in PyTorch's
	// batch norm; fp16 runs cuDNN's.
	bf16 := spec{id: "bf16", set: set("precision", "bf16", "channels_last", "true"), thr: 4672, stepMS: 54.8,
		prof: gpuProfile(54.8, 53.5, map[string]float64{profile.BatchNorm: 24.1, profile.Convolution: 15.1, profile.Elementwise: 10, profile.Other: 4.3}, 0)}
	fp16 := spec{id: "fp16", set: set("precision", "fp16", "channels_last", "true"), thr: 5860, stepMS: 43.7,
		prof: gpuProfile(43.7, 42.5, map[string]float64{profile.BatchNorm: 12.5, profile.Convolution: 15.5, profile.Elementwise: 10, profile.Other: 4.3},
			0, "void cudnn::bn_fw_tr_1C11_singleread_spec<__half, float, 512, true, 1, 2>")}
	fp16Within := fp16
	fp16Within.thr = 4720
	bnEngine := func(dtype string) string {
		return "void cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel<" + dtype + ", true>(" + dtype + " const*, unsigned char const*)"
	}
	engineBF16 := spec{id: "e", set: set("precision", "bf16", "channels_last", "true"), thr: 6444, stepMS: 39.7,
		prof: gpuProfile(39.7, 39.2, map[string]float64{profile.BatchNorm: 19, profile.Convolution: 11.4, profile.Elementwise: 8.8}, 0, bnEngine("__nv_bfloat16"))}
	engineFP16 := spec{id: "e16", set: set("precision", "fp16", "channels_last", "true"), thr: 6521, stepMS: 39.3,
		prof: gpuProfile(39.3, 38.4, map[string]float64{profile.BatchNorm: 19, profile.Convolution: 9.5, profile.Elementwise: 9.9}, 0, bnEngine("__half"))}
	balanced := spec{id: "ok", thr: 100, stepMS: 20, prof: gpuProfile(20, 19, map[string]float64{profile.GEMM: 15, profile.LayerNorm: 2, profile.Elementwise: 2}, 0)}
	runCases(t, "profile-normalisation", []ruleCase{
		{name: "bf16 batch norm dominates, fp16 measured faster", status: Finding,
			run: mkRun([]spec{bf16, fp16}, gpu, withBaseline("precision", "bf16"), withBaseline("channels_last", "true")),
			contains: []string{"normalisation took 45.0% of trial bf16's kernel time", "at::native::batch_norm_collect_statistics_channels_last_kernel (PyTorch's own)",
				"fp16 (", "batch norm 12.5 ms per step", "cudnn::bn_fw_tr_1C11_singleread_spec",
				"precision: fp16 against bf16 (trials fp16, bf16): 1.25× ", "batch norm runs PyTorch's own kernels in bf16, cuDNN's in fp16",
				"precision: fp16 (trial fp16: 1.25× "},
			absent: []string{"25% faster"},
			trials: []string{"bf16", "fp16"}},
		// results/reference/resnet50-h200-kernel-mix-2026-12-02: the engine's
		// own batch norm in both precisions, the fp16 twin 1.01x on one
		// launch (undecided) and above the threshold itself.
		{name: "engine's own batch norm, fp16 twin not faster", status: Finding,
			run: oneLaunch(mkRun([]spec{engineBF16, engineFP16}, gpu, withBaseline("precision", "bf16"), withBaseline("channels_last", "true"))),
			contains: []string{"largest: cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel (the engine's own)",
				"precision: fp16 against bf16 (trials e16, e): 1.01× undecided (one launch: estimate only)",
				"batch norm runs the engine's own kernels in both"},
			absent: []string{"precision: fp16 (", "PyTorch's own", "cuDNN", "25%"},
			trials: []string{"e", "e16"}},
		{name: "fp16 twin measured within the threshold", status: Finding,
			run:      mkRun([]spec{noisy(bf16, 0.002), noisy(fp16Within, 0.002)}, gpu, withBaseline("precision", "bf16"), withBaseline("channels_last", "true")),
			contains: []string{"within ±5%"}, absent: []string{"precision: fp16 (", "25%"}},
		{name: "no fp16 twin, PyTorch's batch norm: measure fp16", status: Finding,
			run:      mkRun([]spec{bf16}, gpu, withBaseline("precision", "bf16"), withBaseline("channels_last", "true")),
			contains: []string{"sweep precision: [bf16, fp16]"}, absent: []string{"precision: fp16 (", "25%"}},
		{name: "channels_first batch norm", status: Finding,
			run:      mkRun([]spec{{id: "nchw", set: set("channels_last", "false"), thr: 100, stepMS: 10, prof: gpuProfile(10, 10, map[string]float64{profile.BatchNorm: 5, profile.Convolution: 5}, 0)}}, gpu),
			contains: []string{"channels_last: true"}},
		{name: "layer norm dominates", status: Finding,
			run:      mkRun([]spec{{id: "ln", thr: 100, stepMS: 10, prof: gpuProfile(10, 10, map[string]float64{profile.LayerNorm: 4, profile.GEMM: 6}, 0)}}, gpu),
			contains: []string{"layer norm 4 ms", "fuse layer norm with the residual add"}},
		{name: "normalisation a small share", status: Pass,
			run: mkRun([]spec{balanced}, gpu), contains: []string{"at most 10.5%"}},
		{name: "no profiles", status: NotApplicable, run: mkRun([]spec{{id: "a", thr: 100, stepMS: 10}}, gpu)},
	})
}

func TestProfileElementwise(t *testing.T) {
	gpu := onGPUs(1, "NVIDIA H200", 141<<30, 0, "")
	heavy := spec{id: "ew", set: set("channels_last", "false"), thr: 100, stepMS: 20,
		prof: gpuProfile(20, 20, map[string]float64{profile.Elementwise: 8, profile.Reduction: 1, profile.Copy: 3, profile.GEMM: 8}, 0)}
	light := spec{id: "mm", thr: 100, stepMS: 20, prof: gpuProfile(20, 20, map[string]float64{profile.Elementwise: 2, profile.GEMM: 18}, 0)}
	runCases(t, "profile-elementwise", []ruleCase{
		{name: "elementwise and copies dominate", status: Finding,
			run:      mkRun([]spec{heavy}, gpu),
			contains: []string{"took 60.0% of trial ew's kernel time", "copies 3 ms", "vectorized_elementwise_kernel", "channels_last: true", "fuse"},
			trials:   []string{"ew"}},
		{name: "matmul-bound step", status: Pass, run: mkRun([]spec{light}, gpu), contains: []string{"at most 10.0%"}},
	})
}

func TestProfileExposedComm(t *testing.T) {
	gpu := onGPUs(2, "NVIDIA H200", 141<<30, 18, "")
	exposed := spec{id: "noov", set: set("ddp.overlap", "false"), ranks: 2, thr: 100, stepMS: 40,
		prof: gpuProfile(40, 38, map[string]float64{profile.GEMM: 28, profile.Communication: 10}, 2)}
	hidden := spec{id: "ov", ranks: 2, thr: 120, stepMS: 32,
		prof: gpuProfile(32, 31, map[string]float64{profile.GEMM: 28, profile.Communication: 10}, 9.5)}
	runCases(t, "profile-exposed-comm", []ruleCase{
		{name: "all-reduce after the backward pass", status: Finding,
			run:      mkRun([]spec{exposed, hidden}, gpu),
			contains: []string{"20.0% of trial noov's step", "communication 10 ms per step, 2 ms of it under compute, 8 ms exposed", "ddp.overlap: true"},
			trials:   []string{"noov"}},
		{name: "all-reduce under compute", status: Pass, run: mkRun([]spec{hidden}, gpu), contains: []string{"at most 1.56%"}},
		{name: "one rank: no collectives", status: NotApplicable,
			run:      mkRun([]spec{{id: "a", thr: 100, stepMS: 10, prof: gpuProfile(10, 10, map[string]float64{profile.GEMM: 10}, 0)}}, gpu),
			contains: []string{"no profiled trial ran collectives"}},
	})
}

// oneLaunch keeps the first launch of every trial (a profiling study's
// repeats: 1): comparisons are then undecided.
func oneLaunch(run *store.Run) *store.Run {
	for i := range run.Trials {
		if len(run.Trials[i].Repeats) > 0 {
			run.Trials[i].Repeats = run.Trials[i].Repeats[:1]
		}
	}
	return run
}

func TestShortKernel(t *testing.T) {
	for in, want := range map[string]string{
		"void cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel<__nv_bfloat16, true>(__nv_bfloat16 const*, unsigned char const*)": "cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel",
		"cs::cuda::(anonymous namespace)::bn_fwd_finalize_kernel(float const*, long, int)":                                           "cs::cuda::(anonymous namespace)::bn_fwd_finalize_kernel",
		"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>":                                 "at::native::(anonymous namespace)::vectorized_layer_norm_kernel",
		"void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var>":                                       "at::native::batch_norm_collect_statistics_channels_last_kernel",
		"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)":                                                 "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
		"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc":                                                           "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc",
	} {
		assert.Equal(t, want, shortKernel(in), in)
	}
}
