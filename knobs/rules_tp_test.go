package knobs

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckTensorParallel: the planner's tensor-parallel rules, and the
// data-parallel rules counting dp = ranks / (tp.degree x pipeline.stages).
func TestCheckTensorParallel(t *testing.T) {
	changed := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	// GPT-2 350M (16 heads) and 774M (20 heads) on one node of 8 GPUs.
	gpt350 := Setting{Device: "cuda", Ranks: 8, Family: "gpt", Model: "gpt 350m", Heads: 16, Nodes: 1, RanksPerNode: 8}
	gpt774 := gpt350
	gpt774.Heads, gpt774.Model = 20, "gpt 774m"
	twoNodes := gpt350
	twoNodes.Ranks, twoNodes.Nodes, twoNodes.RanksPerNode = 8, 2, 4
	across := twoNodes
	across.AllowTPAcrossNodes = true
	// BERT-large (16 heads) and base (12).
	bertLarge := Setting{Device: "cuda", Ranks: 8, Family: "bert", Model: "bert large", Heads: 16, Nodes: 1, RanksPerNode: 8}
	rehearsed := gpt350
	rehearsed.Rehearse = true
	onCPU := gpt350
	onCPU.Device = "cpu"
	bertBase := bertLarge
	bertBase.Heads, bertBase.Model = 12, "bert base"
	tests := []struct {
		name    string
		values  map[string]string
		changed map[string]bool
		s       Setting
		want    string // substring; "" = allowed
	}{
		{"tp 2", map[string]string{"tp.degree": "2"}, nil, gpt350, ""},
		{"tp 8 sp", map[string]string{"tp.degree": "8", "tp.sequence_parallel": "true"}, nil, gpt350, ""},
		{"sp without tp", map[string]string{"tp.sequence_parallel": "true"}, nil, gpt350, "needs tp.degree > 1"},
		{"sp tp 1", map[string]string{"tp.degree": "1", "tp.sequence_parallel": "true"}, nil, gpt350, "needs tp.degree > 1"},
		{"resnet", map[string]string{"tp.degree": "2"}, nil, Setting{Device: "cuda", Ranks: 8, Family: "resnet50"}, "ResNet-50 is not tensor-parallel"},
		{"heads 774m tp 4", map[string]string{"tp.degree": "4"}, nil, gpt774, ""},
		{"heads 774m tp 8", map[string]string{"tp.degree": "8"}, nil, gpt774, "does not divide the 20 attention heads of gpt 774m"},
		{"tp x pp ranks", map[string]string{"tp.degree": "4"}, nil, Setting{Device: "cuda", Ranks: 6, Family: "gpt", Heads: 16}, "tp.degree=4 x pipeline.stages=1 = 4 does not divide the trial's 6 ranks"},
		{"tp > ranks", map[string]string{"tp.degree": "8"}, nil, Setting{Device: "cuda", Ranks: 4, Family: "gpt", Heads: 16}, "does not divide the trial's 4 ranks"},
		{"replicas", map[string]string{"tp.degree": "2"}, nil, Setting{Device: "cuda", Ranks: 2, World: 1, Family: "gpt", Heads: 16}, "does not divide the trial's 1 ranks"},
		{"tp inside a node", map[string]string{"tp.degree": "4"}, nil, twoNodes, ""},
		{"tp across nodes", map[string]string{"tp.degree": "8"}, nil, twoNodes, "a tensor group would span nodes"},
		{"tp across nodes allowed", map[string]string{"tp.degree": "8"}, nil, across, ""},
		{"tp pipeline", map[string]string{"tp.degree": "2", "pipeline.stages": "2"}, nil, gpt350, ""},
		{"tp x pp x dp", map[string]string{"tp.degree": "2", "pipeline.stages": "2", "pipeline.schedule": "1f1b", "tp.sequence_parallel": "true"}, nil, gpt350, ""},
		{"tp x pp ranks", map[string]string{"tp.degree": "4", "pipeline.stages": "4"}, nil, gpt350, "tp.degree=4 x pipeline.stages=4 = 16 does not divide the trial's 8 ranks"},
		{"tp x pp 2 nodes", map[string]string{"tp.degree": "4", "pipeline.stages": "2"}, nil, twoNodes, ""},
		{"tp pipeline balanced by time", map[string]string{"tp.degree": "2", "pipeline.stages": "2", "pipeline.balance": "time"}, nil, gpt350, "pipeline.balance=time is not implemented"},
		{"tp pipeline zero", map[string]string{"tp.degree": "2", "pipeline.stages": "2", "zero.stage": "1"}, nil, gpt350, "zero.stage=1 with pipeline.stages=2"},
		// ZeRO shards over the data group: dp = 8 / tp.
		{"tp zero 1", map[string]string{"tp.degree": "2", "zero.stage": "1"}, nil, gpt350, ""},
		{"tp zero 2", map[string]string{"tp.degree": "4", "zero.stage": "2"}, nil, bertLarge, ""},
		{"tp 8 zero", map[string]string{"tp.degree": "8", "zero.stage": "1"}, nil, gpt350, "zero.stage=1 needs more than one data-parallel rank (this trial has 1: ranks 8, tp.degree 8, pipeline.stages 1)"},
		{"tp zero compression", map[string]string{"tp.degree": "2", "zero.stage": "1", "ddp.compression": "fp16"}, nil, gpt350, "ddp.compression=fp16 is not implemented"},
		// zero.overlap_gather under tp: no effect over NCCL groups (trainer.cpp
		// keeps the all-gathers in the step); a rehearsal, CPU ranks and an
		// unchanged baseline value are not judged.
		{"tp zero gather overlap on cuda", map[string]string{"tp.degree": "2", "zero.stage": "1", "zero.overlap_gather": "false"},
			changed("zero.overlap_gather"), gpt350, "zero.overlap_gather=false has no effect with tp.degree=2 on device cuda: over NCCL groups"},
		{"tp zero gather overlap rehearsed", map[string]string{"tp.degree": "2", "zero.stage": "2", "zero.overlap_gather": "false"},
			changed("zero.overlap_gather"), rehearsed, ""},
		{"tp zero gather overlap on cpu", map[string]string{"tp.degree": "2", "zero.stage": "1", "zero.overlap_gather": "true"},
			changed("zero.overlap_gather"), onCPU, ""},
		{"tp zero gather overlap unchanged", map[string]string{"tp.degree": "2", "zero.stage": "1", "zero.overlap_gather": "false"},
			changed("tp.degree"), gpt350, ""},
		{"zero gather overlap without tp", map[string]string{"zero.stage": "1", "zero.overlap_gather": "false"},
			changed("zero.overlap_gather"), gpt350, ""},
		{"tp bert", map[string]string{"tp.degree": "2"}, nil, bertLarge, ""},
		{"tp bert 8 sp", map[string]string{"tp.degree": "8", "tp.sequence_parallel": "true"}, nil, bertLarge, ""},
		{"tp bert base 8", map[string]string{"tp.degree": "8"}, nil, bertBase, "does not divide the 12 attention heads of bert base"},
		{"tp bert base 4", map[string]string{"tp.degree": "4"}, nil, bertBase, ""},
		{"tp bert pipeline", map[string]string{"tp.degree": "2", "pipeline.stages": "2"}, nil, bertLarge, ""},
		{"tp fp8", map[string]string{"tp.degree": "2", "precision": "fp8"}, nil, gpt350, "use bf16"},
		{"tp compression", map[string]string{"tp.degree": "2", "ddp.compression": "fp16"}, nil, gpt350, "ddp.compression=fp16 is not implemented"},
		{"tp checkpointing", map[string]string{"tp.degree": "2", "activation_checkpointing": "true"}, nil, gpt350, "activation_checkpointing"},
		// dp = 8 / (tp x pp): the DDP knobs lose their effect at tp 8 (one
		// data-parallel rank), and with any tp (no bucketed reducer).
		{"ddp tp 8", map[string]string{"tp.degree": "8", "ddp.bucket_mb": "5"}, changed("ddp.bucket_mb"), gpt350, "no effect with one data-parallel rank (ranks 8, tp.degree 8, pipeline.stages 1)"},
		{"ddp tp 4", map[string]string{"tp.degree": "4", "ddp.bucket_mb": "5"}, changed("ddp.bucket_mb"), gpt350, "not through the bucketed reducer"},
		{"ddp overlap tp 2", map[string]string{"tp.degree": "2", "ddp.overlap": "false"}, changed("ddp.overlap"), gpt350, "has no effect with tp.degree=2"},
		// With ZeRO the buckets are its own: their sizes act, the overlap does not.
		{"ddp tp zero bucket", map[string]string{"tp.degree": "2", "zero.stage": "1", "ddp.bucket_mb": "5"}, changed("ddp.bucket_mb"), gpt350, ""},
		{"ddp tp zero first bucket", map[string]string{"tp.degree": "2", "zero.stage": "2", "ddp.first_bucket_mb": "2"}, changed("ddp.first_bucket_mb"), gpt350, ""},
		{"ddp tp zero overlap", map[string]string{"tp.degree": "2", "zero.stage": "1", "ddp.overlap": "false"}, changed("ddp.overlap"), gpt350, "never overlapped with it"},
		{"ddp tp 1", map[string]string{"tp.degree": "1", "ddp.bucket_mb": "5"}, changed("ddp.bucket_mb"), gpt350, ""},
		{"ddp tp 8 baseline", map[string]string{"tp.degree": "8", "ddp.bucket_mb": "5"}, nil, gpt350, ""},
		{"zero dp counts tp", map[string]string{"zero.stage": "1"}, nil, Setting{Device: "cuda", Ranks: 1}, "more than one data-parallel rank (this trial has 1"},
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

// TestLayoutOf: ranks are tensor-fastest, then data, then pipeline.
func TestLayoutOf(t *testing.T) {
	l := LayoutOf(map[string]string{"tp.degree": "2", "pipeline.stages": "2"}, 8)
	assert.Equal(t, TPLayout{TP: 2, DP: 2, PP: 2}, l)
	assert.Equal(t, TPLayout{TP: 1, DP: 8, PP: 1}, LayoutOf(nil, 8), "defaults: all data parallel")
	assert.Equal(t, TPLayout{TP: 8, DP: 1, PP: 1}, LayoutOf(map[string]string{"tp.degree": "8"}, 8))
	// rank = t + tp*(d + dp*p): rank 5 = 1 + 2*(0 + 2*1).
	assert.Equal(t, 1, l.TensorRank(5))
	assert.Equal(t, 0, l.DataRank(5))
	assert.Equal(t, 1, l.DataRank(2))
	assert.Equal(t, 0, l.TensorRank(2))
}

// TestEngineConfigTP: the engine's tp object only when the degree splits.
func TestEngineConfigTP(t *testing.T) {
	var cfg engine.Config
	require.NoError(t, EngineConfig(map[string]string{"tp.degree": "4", "tp.sequence_parallel": "true"}, &cfg))
	assert.Equal(t, &engine.TPConfig{Degree: 4, SequenceParallel: true}, cfg.TP)
	require.NoError(t, EngineConfig(map[string]string{"tp.degree": "2"}, &cfg))
	assert.Equal(t, &engine.TPConfig{Degree: 2}, cfg.TP)
	require.NoError(t, EngineConfig(map[string]string{"tp.degree": "1"}, &cfg))
	assert.Nil(t, cfg.TP, "degree 1: no tp object (the engine config stays as before)")
	require.NoError(t, EngineConfig(nil, &cfg))
	assert.Nil(t, cfg.TP)
}
