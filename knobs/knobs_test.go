package knobs

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

var update = flag.Bool("update", false, "rewrite docs/knobs.md")

func TestRegistryEntriesAreComplete(t *testing.T) {
	required := []string{"nccl.algo", "nccl.proto", "nccl.min_channels", "nccl.max_channels", "nccl.buffsize",
		"nccl.nthreads", "nccl.p2p_level", "nccl.p2p_disable", "nccl.shm_disable", "nccl.ib_disable", "nccl.debug",
		"nccl.socket_ifname", "nccl.net_gdr_level", "nccl.ib_hca", "nccl.cross_nic",
		"cuda.device_max_connections", "precision", "graphs", "ddp.bucket_mb", "ddp.first_bucket_mb",
		"ddp.overlap", "ddp.compression", "ddp.topk_ratio", "pipeline.stages", "pipeline.microbatches",
		"pipeline.schedule", "pipeline.balance", "grad_accum", "mps", "mps.active_thread_pct", "procs_per_gpu",
		"micro_batch", "seq_len", "image_size", "channels_last", "activation_checkpointing",
		"fault.kind", "fault.rank", "fault.at_step", "fault.slow_ms", "zero.stage", "zero.overlap_gather", "resnet.fusion"}
	for _, name := range required {
		_, ok := Lookup(name)
		assert.True(t, ok, name)
	}
	for _, k := range All() {
		assert.NotEmpty(t, k.Doc, k.Name)
		assert.Positive(t, k.Chapter, k.Name)
		assert.Contains(t, []Apply{Env, Engine, Launcher}, k.Apply, k.Name)
		if k.Apply == Env {
			assert.NotEmpty(t, k.EnvVar, k.Name)
		}
		// The default must itself be a valid value.
		got, err := k.Canonical(k.Default)
		if assert.NoError(t, err, k.Name) {
			assert.Equal(t, k.Default, got, k.Name)
		}
	}
	nccl, _ := Lookup("nccl.algo")
	assert.Equal(t, []string{"Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT", "auto"}, nccl.Values)
}

// TestNumericKnobsAreBounded (audit C1): a value no study could need
// (grad_accum: 4294967297) is refused when the study is validated instead of
// spending a trial's whole timeout, so every int, float and size knob has both
// bounds, and the domain the errors and docs/knobs.md print names them.
func TestNumericKnobsAreBounded(t *testing.T) {
	for _, k := range All() {
		if k.Type != Int && k.Type != Float && k.Type != Size {
			continue
		}
		if assert.NotEmpty(t, k.Min, "%s has no lower bound", k.Name) && assert.NotEmpty(t, k.Max, "%s has no upper bound", k.Name) {
			lo, err1 := parseBound(k.Min)
			hi, err2 := parseBound(k.Max)
			require.NoError(t, err1, k.Name)
			require.NoError(t, err2, k.Name)
			assert.Less(t, lo, hi, k.Name)
			assert.Contains(t, k.Domain(), k.Min+".."+k.Max, k.Name)
		}
	}
}

func TestRegistryAlgoValues(t *testing.T) {
	nccl, _ := Lookup("nccl.algo")
	assert.Equal(t, []string{"Ring", "Tree", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT", "auto"}, nccl.Values)
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		knob string
		raw  any
		want string
		err  string
	}{
		{knob: "precision", raw: "BF16", want: "bf16"},
		{knob: "nccl.algo", raw: "ring", want: "Ring"},
		{knob: "nccl.algo", raw: "Auto", want: "auto"},
		{knob: "nccl.algo", raw: "Default", want: "default"},
		{knob: "nccl.ib_hca", raw: "default", want: "default"},
		{knob: "nccl.p2p_disable", raw: "default", want: "default"},
		{knob: "nccl.min_channels", raw: "default", want: "default"},
		{knob: "precision", raw: "default", err: "is not one of"},
		{knob: "seq_len", raw: "default", err: "not an integer"},
		{knob: "nccl.algo", raw: "Rings", err: `did you mean "Ring"?`},
		{knob: "graphs", raw: true, want: "true"},
		{knob: "graphs", raw: "no", want: "false"},
		{knob: "nccl.p2p_disable", raw: 1, want: "true"},
		{knob: "graphs", raw: "maybe", err: "not a boolean"},
		{knob: "graphs", raw: "auto", err: "not a boolean"},
		{knob: "grad_accum", raw: "025", want: "25"},
		{knob: "grad_accum", raw: 2, want: "2"},
		{knob: "grad_accum", raw: "0", err: "below the minimum 1"},
		{knob: "grad_accum", raw: "1.5", err: "not an integer"},
		{knob: "ddp.bucket_mb", raw: "1.50", want: "1.5"},
		{knob: "ddp.bucket_mb", raw: 25.0, want: "25"},
		{knob: "ddp.bucket_mb", raw: "NaN", err: "NaN and infinity are not allowed"},
		{knob: "ddp.bucket_mb", raw: "-Inf", err: "NaN and infinity are not allowed"},
		{knob: "ddp.bucket_mb", raw: "1e999", err: "NaN and infinity are not allowed"},
		// audit C1: every integer knob has an upper bound, named in the error
		{knob: "grad_accum", raw: "4294967297", err: "4294967297 is above the maximum 4096 (integer 1..4096)"},
		{knob: "grad_accum", raw: "4096", want: "4096"},
		{knob: "grad_accum", raw: "99999999999999999999", err: "99999999999999999999 is out of range (integer 1..4096)"},
		{knob: "micro_batch", raw: "65537", err: "above the maximum 65536"},
		{knob: "seq_len", raw: "1048577", err: "above the maximum 1048576"},
		{knob: "image_size", raw: "8193", err: "above the maximum 8192"},
		{knob: "pipeline.microbatches", raw: "1025", err: "above the maximum 1024"},
		{knob: "fault.at_step", raw: "1100001", err: "above the maximum 1100000"},
		{knob: "nccl.buffsize", raw: "4MiB", want: "4194304"},
		{knob: "nccl.buffsize", raw: "4194304", want: "4194304"},
		{knob: "nccl.buffsize", raw: "1KiB", err: "below the minimum"},
		{knob: "nccl.min_channels", raw: "auto", want: "auto"},
		{knob: "nccl.min_channels", raw: "65", err: "above the maximum 64"},
		{knob: "mps.active_thread_pct", raw: "50", want: "50"},
		{knob: "mps.active_thread_pct", raw: "auto", want: "auto"},
		{knob: "mps.active_thread_pct", raw: "0", err: "below the minimum"},
		{knob: "ddp.compression", raw: "TopK:0.010", want: "topk:0.01"},
		{knob: "ddp.compression", raw: "topk:2", err: "(0, 1]"},
		{knob: "ddp.compression", raw: "fp61", err: `did you mean "fp16"?`},
		{knob: "pipeline.balance", raw: "5, 7", want: "5,7"},
		{knob: "pipeline.balance", raw: "5,x", err: "positive layer counts"},
		{knob: "pipeline.balance", raw: "time", want: "time"},
		{knob: "pipeline.balance", raw: "params", want: "params"},
		{knob: "pipeline.balance", raw: "flops", err: "expected params, time or positive layer counts"},
		{knob: "nccl.socket_ifname", raw: "^docker,lo", want: "^docker,lo"},
		{knob: "bucket_mbs", raw: "1", err: `did you mean "ddp.bucket_mb"?`},
		{knob: "precision", raw: []any{"a"}, err: "expected a single value"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.knob, tt.raw)
		if tt.err != "" {
			if assert.Error(t, err, "%s=%v", tt.knob, tt.raw) {
				assert.Contains(t, err.Error(), tt.err)
			}
			continue
		}
		if assert.NoError(t, err, "%s=%v", tt.knob, tt.raw) {
			assert.Equal(t, tt.want, got, "%s=%v", tt.knob, tt.raw)
		}
	}
}

func TestSuggest(t *testing.T) {
	assert.Equal(t, "ddp.bucket_mb", Suggest("bucket_mbs"))
	assert.Equal(t, "nccl.algo", Suggest("nccl.algos"))
	assert.Equal(t, "precision", Suggest("precison"))
	assert.Equal(t, "", Suggest("completely_unrelated_thing"))
}

func TestEnvironment(t *testing.T) {
	set, unset := Environment(map[string]string{"nccl.algo": "Ring", "nccl.p2p_disable": "true", "nccl.buffsize": "4194304",
		"nccl.ib_hca": "default", "nccl.socket_ifname": "default"})
	assert.Equal(t, "Ring", set["NCCL_ALGO"])
	assert.Equal(t, "1", set["NCCL_P2P_DISABLE"])
	assert.Equal(t, "4194304", set["NCCL_BUFFSIZE"])
	assert.Equal(t, "0", set[NVLSEnableVar])
	assert.Equal(t, []string{"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"}, unset, "default unsets, auto (nccl.proto's default) inherits")
	_, has := set["NCCL_PROTO"]
	assert.False(t, has, "auto sets nothing: the environment's value stands")
	// Non-env knobs never leak into the environment.
	for v := range set {
		assert.NotEqual(t, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v)
	}

	// NVLS (only planned with allow_nvls): the parent's NCCL_NVLS_ENABLE stands; never 1.
	set, unset = Environment(map[string]string{"nccl.algo": "NVLS"})
	_, has = set[NVLSEnableVar]
	assert.False(t, has)
	assert.NotContains(t, unset, NVLSEnableVar)
	for _, algo := range nccl().Values {
		set, _ := Environment(map[string]string{"nccl.algo": algo})
		assert.NotEqual(t, "1", set[NVLSEnableVar], algo)
	}
}

func nccl() *Knob { k, _ := Lookup("nccl.algo"); return k }

func TestEngineConfig(t *testing.T) {
	var cfg engine.Config
	require.NoError(t, EngineConfig(map[string]string{
		"precision": "bf16", "graphs": "true", "grad_accum": "2", "micro_batch": "16", "seq_len": "128",
		"ddp.bucket_mb": "5", "ddp.overlap": "false", "ddp.compression": "topk:0.05",
		"pipeline.stages": "2", "pipeline.microbatches": "8", "pipeline.schedule": "gpipe", "pipeline.balance": "3,5",
		"fault.kind": "hang", "fault.rank": "1", "fault.at_step": "3",
	}, &cfg))
	assert.Equal(t, "bf16", cfg.Precision)
	assert.True(t, cfg.Graphs)
	assert.Equal(t, 2, cfg.GradAccum)
	assert.Equal(t, 16, cfg.MicroBatch)
	assert.Equal(t, 128, cfg.SeqLen)
	assert.Equal(t, 0, cfg.ImageSize) // auto
	assert.Equal(t, 5.0, cfg.DDP.BucketMB)
	assert.Equal(t, 1.0, cfg.DDP.FirstBucketMB)
	assert.False(t, cfg.DDP.Overlap)
	assert.Equal(t, "topk", cfg.DDP.Compression)
	assert.Equal(t, 0.05, cfg.DDP.TopKRatio)
	assert.Equal(t, engine.PipelineConfig{Stages: 2, Microbatches: 8, Schedule: "gpipe", Balance: []int{3, 5}}, cfg.Pipeline)
	assert.Equal(t, engine.FaultConfig{Kind: "hang", Rank: 1, AtStep: 3}, cfg.Fault)

	for v, want := range map[string]engine.PipelineConfig{
		"time":   {Stages: 2, Microbatches: 1, Schedule: "1f1b", BalanceBy: "time"},
		"params": {Stages: 2, Microbatches: 1, Schedule: "1f1b"},
		"auto":   {Stages: 2, Microbatches: 1, Schedule: "1f1b"},
	} {
		var c engine.Config
		require.NoError(t, EngineConfig(map[string]string{"pipeline.stages": "2", "pipeline.balance": v}, &c))
		assert.Equal(t, want, c.Pipeline, "pipeline.balance=%s", v)
	}

	cfg = engine.Config{}
	require.NoError(t, EngineConfig(map[string]string{"ddp.compression": "topk", "ddp.topk_ratio": "0.2"}, &cfg))
	assert.Equal(t, 0.2, cfg.DDP.TopKRatio)
	assert.Equal(t, "fp32", cfg.Precision)
	assert.Equal(t, "", cfg.Fault.Kind)
	assert.Nil(t, cfg.Zero.OverlapGather, "zero.overlap_gather's default is the engine's (true): not sent")

	cfg = engine.Config{}
	require.NoError(t, EngineConfig(map[string]string{"zero.stage": "1", "zero.overlap_gather": "false"}, &cfg))
	assert.Equal(t, 1, cfg.Zero.Stage)
	require.NotNil(t, cfg.Zero.OverlapGather)
	assert.False(t, *cfg.Zero.OverlapGather)

	assert.Nil(t, cfg.FP8, "fp8 recipe only with precision fp8")

	cfg = engine.Config{}
	require.NoError(t, EngineConfig(map[string]string{"precision": "fp8", "fp8.scaling": "row"}, &cfg))
	assert.Equal(t, &engine.FP8Config{Scaling: "row", Grad: "e5m2"}, cfg.FP8)

	assert.Nil(t, cfg.ResNet, "resnet.fusion off: no resnet object")
	cfg = engine.Config{}
	require.NoError(t, EngineConfig(map[string]string{"resnet.fusion": "cudnn"}, &cfg))
	assert.Equal(t, &engine.ResNetConfig{Fusion: "cudnn"}, cfg.ResNet)

	assert.Error(t, EngineConfig(map[string]string{"grad_accum": "two"}, &cfg))
}

func TestLaunchSettings(t *testing.T) {
	l, err := LaunchSettings(map[string]string{"mps": "true", "mps.active_thread_pct": "50", "procs_per_gpu": "2"})
	require.NoError(t, err)
	assert.Equal(t, Launch{MPS: true, ActiveThreadPct: 50, ProcsPerGPU: 2}, l)
	l, err = LaunchSettings(nil)
	require.NoError(t, err)
	assert.Equal(t, Launch{ProcsPerGPU: 1}, l)
}

func TestCheck(t *testing.T) {
	all := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	gpu8 := Setting{Device: "cuda", Ranks: 8}
	tests := []struct {
		name    string
		values  map[string]string
		changed map[string]bool
		s       Setting
		want    string // substring; "" = allowed
	}{
		{"defaults", nil, nil, gpu8, ""},
		{"algo one rank", map[string]string{"nccl.algo": "Tree"}, nil, Setting{Device: "cuda", Ranks: 1}, "needs more than one rank"},
		{"algo default one rank", map[string]string{"nccl.algo": "default"}, nil, Setting{Device: "cuda", Ranks: 1}, ""},
		{"proto one rank", map[string]string{"nccl.proto": "LL"}, nil, Setting{Device: "cuda", Ranks: 1}, "needs more than one rank"},
		{"algo eight ranks", map[string]string{"nccl.algo": "Tree"}, nil, gpu8, ""},
		{"algo replicas", map[string]string{"nccl.algo": "Tree"}, nil, Setting{Device: "cuda", Ranks: 2, World: 1}, "in the communicator"},
		{"nvls refused", map[string]string{"nccl.algo": "NVLSTree"}, nil, gpu8, "allow_nvls"},
		{"nvls allowed", map[string]string{"nccl.algo": "NVLS"}, nil, Setting{Device: "cuda", Ranks: 8, AllowNVLS: true}, ""},
		{"stages > ranks", map[string]string{"pipeline.stages": "4"}, nil, Setting{Device: "cpu", Ranks: 2}, "exceeds the trial's 2 ranks"},
		{"stages divide", map[string]string{"pipeline.stages": "3"}, nil, gpu8, "does not divide"},
		{"balance entries", map[string]string{"pipeline.stages": "2", "pipeline.balance": "1,2,3"}, nil, gpu8, "3 entries for 2"},
		{"channels", map[string]string{"nccl.min_channels": "8", "nccl.max_channels": "4"}, nil, gpu8, "below nccl.min_channels"},
		{"mps cpu", map[string]string{"mps": "true"}, nil, Setting{Device: "cpu", Ranks: 2}, "needs device cuda"},
		{"graphs cpu kept", map[string]string{"graphs": "true"}, all("graphs"), Setting{Device: "cpu", Ranks: 1}, ""},
		{"zero data parallel", map[string]string{"zero.stage": "2"}, nil, gpu8, ""},
		{"zero one rank", map[string]string{"zero.stage": "1"}, nil, Setting{Device: "cuda", Ranks: 1}, "more than one data-parallel rank"},
		{"zero pipeline", map[string]string{"zero.stage": "1", "pipeline.stages": "2"}, nil, gpu8, "not under a pipeline"},
		{"zero 2 compression", map[string]string{"zero.stage": "2", "ddp.compression": "fp16"}, nil, gpu8, "use zero.stage 1"},
		{"zero 1 compression", map[string]string{"zero.stage": "1", "ddp.compression": "fp16"}, nil, gpu8, ""},
		{"zero gather overlap off", map[string]string{"zero.stage": "1", "zero.overlap_gather": "false"}, all("zero.overlap_gather"), gpu8, ""},
		{"zero gather overlap without zero", map[string]string{"zero.overlap_gather": "false"}, all("zero.overlap_gather"), gpu8, "no effect with zero.stage 0"},
		{"graphs data parallel", map[string]string{"graphs": "true"}, nil, gpu8, "single rank only"},
		{"graphs pipeline", map[string]string{"graphs": "true", "pipeline.stages": "2"}, nil, Setting{Device: "cuda", Ranks: 2}, "single rank only"},
		{"graphs replicas", map[string]string{"graphs": "true"}, nil, Setting{Device: "cuda", Ranks: 2, World: 1}, ""},
		{"graphs one gpu", map[string]string{"graphs": "true"}, all("graphs"), Setting{Device: "cuda", Ranks: 1}, ""},
		{"ddp one rank changed", map[string]string{"ddp.bucket_mb": "5"}, all("ddp.bucket_mb"), Setting{Device: "cuda", Ranks: 1}, "one data-parallel rank"},
		{"ddp one rank baseline", map[string]string{"ddp.bucket_mb": "5"}, nil, Setting{Device: "cuda", Ranks: 1}, ""},
		{"ddp all pipeline", map[string]string{"ddp.overlap": "false", "pipeline.stages": "2"}, all("ddp.overlap"), Setting{Device: "cpu", Ranks: 2}, "one data-parallel rank"},
		{"ddp dp x pp bucket", map[string]string{"ddp.bucket_mb": "5", "pipeline.stages": "2"}, all("ddp.bucket_mb"), gpu8, "no effect with pipeline.stages=2"},
		{"ddp dp x pp overlap", map[string]string{"ddp.overlap": "false", "pipeline.stages": "4"}, all("ddp.overlap"), gpu8, "not through the bucketed reducer"},
		{"ddp dp x pp baseline", map[string]string{"ddp.bucket_mb": "5", "pipeline.stages": "2"}, all("pipeline.stages"), gpu8, ""},
		{"ddp data parallel", map[string]string{"ddp.bucket_mb": "5"}, all("ddp.bucket_mb"), gpu8, ""},
		{"nccl on cpu", map[string]string{"nccl.buffsize": "4194304"}, all("nccl.buffsize"), Setting{Device: "cpu", Ranks: 2}, "no effect on device cpu"},
		{"topk ratio", map[string]string{"ddp.topk_ratio": "0.1"}, all("ddp.topk_ratio"), gpu8, "unless ddp.compression is topk"},
		{"topk ratio ok", map[string]string{"ddp.topk_ratio": "0.1", "ddp.compression": "topk"}, all("ddp.topk_ratio"), gpu8, ""},
		{"schedule no stages", map[string]string{"pipeline.schedule": "gpipe"}, all("pipeline.schedule"), gpu8, "without pipeline stages"},
		{"mps pct without mps", map[string]string{"mps.active_thread_pct": "50"}, all("mps.active_thread_pct"), gpu8, "unless mps is true"},
		{"fp8 gpt hopper", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "cuda", Ranks: 1, Family: "gpt", ComputeCap: 90}, ""},
		{"fp8 bert ada", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "cuda", Ranks: 1, Family: "bert", ComputeCap: 89}, ""},
		{"fp8 capability unknown", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "auto", Ranks: 1, Family: "gpt"}, ""},
		{"fp8 resnet", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "cuda", Ranks: 1, Family: "resnet50", ComputeCap: 90}, "resnet50 is convolutions"},
		{"fp8 cpu", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "cpu", Ranks: 1, Family: "gpt"}, "this study runs on cpu"},
		{"fp8 cpu baseline", map[string]string{"precision": "fp8"}, nil, Setting{Device: "cpu", Ranks: 1, Family: "gpt"}, "this study runs on cpu"},
		{"fp8 a100", map[string]string{"precision": "fp8"}, all("precision"), Setting{Device: "cuda", Ranks: 1, Family: "gpt", ComputeCap: 80}, "this node's GPUs are 8.0"},
		{"fp8 scaling without fp8", map[string]string{"precision": "bf16", "fp8.scaling": "row"}, all("fp8.scaling"), gpu8, "unless precision is fp8"},
		{"fusion fp16", map[string]string{"resnet.fusion": "cudnn", "precision": "fp16", "channels_last": "true"}, all("resnet.fusion"), Setting{Device: "cuda", Ranks: 1, Family: "resnet50"}, ""},
		{"fusion bf16", map[string]string{"resnet.fusion": "cudnn", "precision": "bf16", "channels_last": "true"}, all("resnet.fusion"), Setting{Device: "cuda", Ranks: 1, Family: "resnet50"}, "takes fp16 only on the H100"},
		{"fusion nchw", map[string]string{"resnet.fusion": "cudnn", "precision": "fp16"}, all("resnet.fusion"), Setting{Device: "cuda", Ranks: 1, Family: "resnet50"}, "set channels_last true"},
		{"fusion cpu", map[string]string{"resnet.fusion": "cudnn", "precision": "fp16", "channels_last": "true"}, all("resnet.fusion"), Setting{Device: "cpu", Ranks: 1, Family: "resnet50"}, "CUDA only"},
		{"fusion checkpointing", map[string]string{"resnet.fusion": "cudnn", "precision": "fp16", "channels_last": "true", "activation_checkpointing": "true"}, all("resnet.fusion"), Setting{Device: "cuda", Ranks: 1, Family: "resnet50"}, "activation checkpointing"},
		{"fp8 scaling with fp8", map[string]string{"precision": "fp8", "fp8.scaling": "row"}, all("fp8.scaling"), Setting{Device: "cuda", Ranks: 1, Family: "gpt"}, ""},
	}
	for _, tt := range tests {
		got := Check(tt.values, tt.changed, tt.s)
		if tt.want == "" {
			assert.Empty(t, got, tt.name)
		} else {
			assert.Contains(t, got, tt.want, tt.name)
		}
	}
}

func TestKnobsDoc(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteMarkdown(&b))
	path := filepath.Join("..", "docs", "knobs.md")
	if *update {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}
	have, err := os.ReadFile(path)
	require.NoError(t, err, "docs/knobs.md missing: go test ./knobs -run TestKnobsDoc -update")
	assert.Equal(t, b.String(), string(have), "docs/knobs.md is stale: go test ./knobs -run TestKnobsDoc -update")
	for _, k := range Visible() {
		assert.Contains(t, string(have), "## "+k.Name)
	}
	assert.NotContains(t, string(have), "fault.kind", "hidden knobs stay out of the docs")
}
