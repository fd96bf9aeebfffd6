package runner

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/study"
	"github.com/stretchr/testify/assert"
)

// TestRankEstimateTensorParallel: tensor parallelism divides one rank's
// model states (of the sharded parameters), the blocks' activations inside
// the parallel regions and the logits by the degree; sequence parallelism
// also the rest of the activations; data parallel is ranks / tp, so tp 8 on
// 8 ranks has no reducer buckets.
func TestRankEstimateTensorParallel(t *testing.T) {
	d := engine.Description{Family: "gpt", Params: 354_823_168, Shapes: map[string]int{"layers": 24, "hidden": 1024,
		"seq_len": 1024, "vocab": 50257, "positions": 1024}}
	c := engine.Config{Family: "gpt", MicroBatch: 4, Precision: "bf16", Dist: engine.DistConfig{WorldSize: 8}}
	ddp := RankEstimate(c, d)
	est := map[int]int64{}
	for _, tp := range []int{2, 4, 8} {
		c.TP = &engine.TPConfig{Degree: tp}
		est[tp] = RankEstimate(c, d)
		c.TP.SequenceParallel = true
		sp := RankEstimate(c, d)
		assert.Less(t, sp, est[tp], "tp %d: sequence parallel splits the replicated activations too", tp)
	}
	assert.Less(t, est[2], ddp)
	assert.Less(t, est[4], est[2])
	assert.Less(t, est[8], est[4])

	// The static part exactly: tp 8 on 8 ranks is one data-parallel rank (no
	// buckets), its states those of one tensor rank's share.
	c.TP = &engine.TPConfig{Degree: 8}
	share := study.TensorShare(d.Params, study.TensorShardedParams("gpt", d.Shapes), 8)
	states := study.EstimateModelStates(share, "gpt", 1, 1, 0).Total()
	c.MicroBatch = 1
	one := RankEstimate(c, d)
	c.MicroBatch = 2
	two := RankEstimate(c, d)
	acts := two - one // one sample's activations
	assert.InDelta(t, float64(states+fitProcessBytes+tpProcessBytes), float64(one-acts), 2, "tp 8: states of the share, no DP buckets")
	// One sample: 1024 tokens x 1024 hidden x 24 blocks x (11.5 whole + 11/8
	// divided) bytes without sequence parallelism (tpBlockBytes: the
	// LayerNorms' 4 bytes of inputs whole), plus 1024 positions x 50257/8
	// logits x 10 bytes (the vocabulary-parallel cross-entropy's fp32
	// softmax, its clone and the bf16 gradient).
	want := 1024.0*1024*24*(11.5+11.0/8) + 1024*50257.0/8*10
	assert.InDelta(t, want, float64(acts), 2)
}

// TestRankEstimateTensorPipeline: tp x pp divides one rank's model states by
// both: its stage's even share of the blocks, split over the tensor group,
// and the vocabulary-sharded embedding (the tied head) whole on each end
// stage; tp 2 x pp 2 on 8 ranks holds less than tp 2 or pp 2 alone, and its
// static part is exactly the share computed here.
func TestRankEstimateTensorPipeline(t *testing.T) {
	d := engine.Description{Family: "gpt", Params: 354_823_168, Shapes: map[string]int{"layers": 24, "hidden": 1024,
		"seq_len": 1024, "vocab": 50257, "positions": 1024}}
	c := engine.Config{Family: "gpt", MicroBatch: 4, Precision: "bf16", Dist: engine.DistConfig{WorldSize: 8},
		Pipeline: engine.PipelineConfig{Stages: 2, Microbatches: 4, Schedule: "1f1b"}}
	pp := RankEstimate(c, d)
	c.TP = &engine.TPConfig{Degree: 2}
	tppp := RankEstimate(c, d)
	c.Pipeline = engine.PipelineConfig{Stages: 1, Microbatches: 1}
	tp := RankEstimate(c, d)
	assert.Less(t, tppp, pp, "tp 2 x pp 2 against pp 2")
	assert.Less(t, tppp, tp, "tp 2 x pp 2 against tp 2")

	// The static part: tp 2 x pp 2 x dp 2, the stage's share of one tensor rank.
	c.Pipeline = engine.PipelineConfig{Stages: 2, Microbatches: 1, Schedule: "1f1b"}
	emb := int64(50257+1024) * 1024
	word := int64(50257) * 1024
	stage := (d.Params-emb)/2 + emb
	sharded := (study.TensorShardedParams("gpt", d.Shapes)-word)/2 + word
	share := study.TensorShare(stage, sharded, 2)
	static := float64(study.EstimateModelStates(share, "gpt", 1, 2, 0).Total()) + float64(share)*dpBucketBytes
	c.MicroBatch = 1
	one := RankEstimate(c, d)
	c.MicroBatch = 2
	two := RankEstimate(c, d)
	assert.InDelta(t, static+fitProcessBytes+tpProcessBytes, float64(one-(two-one)), 2, "tp 2 x pp 2: the stage's tensor share")
	assert.Less(t, float64(share), 0.3*float64(d.Params), "about a quarter of the model (the embedding on both ends)")
}

// TestRankEstimateTPZero: tensor parallelism x ZeRO. A rank holds its tensor
// share of the weights (1/tp of the sharded ones, every replicated one), and
// ZeRO divides that share's optimizer states over the data-parallel group
// (and stage 2 drops the reducer's bucket storage: docs/zero.md), dp = ranks / tp: BERT-large, 8 ranks, tp 2,
// so dp 4.
func TestRankEstimateTPZero(t *testing.T) {
	b := engine.Description{Family: "bert", Params: 336_226_108, Shapes: map[string]int{"layers": 24, "hidden": 1024,
		"intermediate": 4096, "seq_len": 128, "vocab": 30522, "masked_per_sequence": 19}}
	c := engine.Config{Family: "bert", MicroBatch: 32, Precision: "bf16", Dist: engine.DistConfig{WorldSize: 8},
		TP: &engine.TPConfig{Degree: 2}}
	share := study.TensorShare(b.Params, study.TensorShardedParams("bert", b.Shapes), 2)
	assert.Less(t, share, b.Params*3/5, "most of BERT-large is sharded")
	const dp = 4
	tp0 := RankEstimate(c, b)
	c.Zero.Stage = 1
	tp1 := RankEstimate(c, b)
	c.Zero.Stage = 2
	tp2 := RankEstimate(c, b)
	// AdamW's 8 bytes a parameter of the share, divided by dp; then the
	// share's 4 bytes of gradients as well (rounded up per rank, as
	// study.EstimateModelStates does).
	ceil := func(n int64) int64 { return (n + dp - 1) / dp }
	assert.Equal(t, 8*share-ceil(8*share), tp0-tp1, "zero 1: optimizer states / dp of the tensor share")
	// ZeRO-2: the gradients' shard (4 bytes a parameter of the share over
	// dp) where ZeRO-1 has all of them; no bucket storage, one bucket buffer
	// in its place: the same 4 bytes a parameter less the buffer.
	assert.Equal(t, 4*share-ceil(4*share)-ZeroBucketBuffer(c, b), tp1-tp2, "zero 2: the gradients' shard, one bucket buffer")
}
