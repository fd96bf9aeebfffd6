package study

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTensorShardedParams: GPT-2 350M's 354,823,168 parameters (the
// library's count, engine/binding) split into what tensor parallelism shards
// (the blocks' linear weights and column biases, the vocabulary) and what
// every tensor rank keeps: 1024 positions x 1024, 6 x 1024 per block of
// LayerNorms and row-parallel biases, the final LayerNorm.
func TestTensorShardedParams(t *testing.T) {
	const params = 354_823_168
	sh := map[string]int{"layers": 24, "hidden": 1024, "vocab": 50257, "positions": 1024}
	sharded := TensorShardedParams("gpt", sh)
	assert.Equal(t, int64(1024*1024+24*6*1024+2*1024), params-sharded, "replicated: positions, LayerNorms, row biases")
	assert.Equal(t, int64(params), TensorShare(params, sharded, 1))
	assert.Equal(t, params-sharded+(sharded+3)/4, TensorShare(params, sharded, 4))
	assert.Zero(t, TensorShardedParams("resnet50", map[string]int{"image_size": 224}))
	assert.Equal(t, int64(params), TensorShare(params, 0, 8), "nothing sharded: every parameter on every rank")
}

// TestTensorShardedParamsBERT: BERT-large's 336,226,108 parameters
// (bert.cpp's count; engine/native/tests/tp_test.cpp checks the formula
// against the shards the engine keeps) less what every tensor rank keeps:
// 512 positions and 2 token types x 1024, the embeddings' LayerNorm, 6 x 1024
// per layer of LayerNorms and row-parallel biases, the pooler and the MLM
// transform (1024^2 + 1024 each), its LayerNorm, the NSP classifier (2 x
// 1024 + 2).
func TestTensorShardedParamsBERT(t *testing.T) {
	const params, h = 336_226_108, 1024
	sh := map[string]int{"layers": 24, "hidden": h, "intermediate": 4 * h, "vocab": 30522}
	sharded := TensorShardedParams("bert", sh)
	assert.Equal(t, int64(514*h+2*h+24*6*h+2*(h*h+h)+2*h+2*h+2), params-sharded)
}

// TestModelStatesForTP: a study's per-rank model states divide the sharded
// parameters by tp.degree and count data parallel as ranks / tp.degree.
func TestModelStatesForTP(t *testing.T) {
	s := &Study{Model: Model{Family: "gpt", Preset: "350m"}, Workload: Workload{Device: "cuda", GPUs: 8}}
	const params = 354_823_168
	one := s.ModelStatesFor(params, map[string]string{"tp.degree": "1"})
	assert.Equal(t, int64(16*params), one.Total(), "DDP: every rank all of it")
	tp8 := s.ModelStatesFor(params, map[string]string{"tp.degree": "8"})
	require.Less(t, tp8.Total(), one.Total()/7)
	assert.Greater(t, tp8.Total(), one.Total()/8, "the replicated LayerNorms and positions stay")
	assert.Equal(t, 1, s.DataParallelFor(map[string]string{"tp.degree": "8"}))
	assert.Equal(t, 4, s.DataParallelFor(map[string]string{"tp.degree": "2"}))
	assert.Equal(t, 2, s.DataParallelFor(map[string]string{"tp.degree": "2", "pipeline.stages": "2"}))
}

// TestModelStatesForTPPipeline: under a pipeline a rank's model states are
// its largest stage's (RankParams): GPT-2 350M's end stages hold their half
// of the blocks and the whole embedding, (50257 + 1024) x 1024, so at tp 2 x
// pp 2 a rank holds 28.9% of the model, not the even split's 25%.
func TestModelStatesForTPPipeline(t *testing.T) {
	s := &Study{Model: Model{Family: "gpt", Preset: "350m"}, Workload: Workload{Device: "cuda", GPUs: 8}}
	const params = 354_823_168
	const emb = (50257 + 1024) * 1024
	one := s.ModelStatesFor(params, map[string]string{"tp.degree": "1"})
	pp2 := s.ModelStatesFor(params, map[string]string{"pipeline.stages": "2"})
	assert.Equal(t, int64(16*((params-emb)/2+emb)), pp2.Total(), "half the blocks and the whole embedding")
	both := s.ModelStatesFor(params, map[string]string{"tp.degree": "2", "pipeline.stages": "2"})
	// The stage's parameters less the blocks' sharded half of the stage and
	// half the vocabulary: 1,198,080 replicated in the model, of which the
	// positions (1024 x 1024) stay whole on the end stage.
	const stage = (params-emb)/2 + emb
	const sharded = (params-1_198_080-50257*1024)/2 + 50257*1024
	assert.Equal(t, int64(16*(stage-sharded+(sharded+1)/2)), both.Total())
	assert.InDelta(t, 0.289, float64(both.Total())/float64(one.Total()), 0.001)
	assert.Equal(t, 2, s.DataParallelFor(map[string]string{"tp.degree": "2", "pipeline.stages": "2"}))
}

// TestRankParamsShapes: the plan's shapes (engine.ShapeOf, engine.Positions)
// give the count the rehearsal's fit check gets from cs_describe's shapes
// (runner.RankEstimate: layers, hidden, vocab, positions; BERT's
// intermediate), so the two estimates agree; one stage of resnet50 (no
// vocabulary) is its even share.
func TestRankParamsShapes(t *testing.T) {
	describe := map[string]int{"layers": 24, "hidden": 1024, "seq_len": 1024, "vocab": 50257, "positions": 1024, "heads": 16}
	s := &Study{Model: Model{Family: "gpt", Preset: "350m"}, Workload: Workload{Device: "cuda", GPUs: 8}}
	const params = 354_823_168
	for _, k := range []map[string]string{
		{"tp.degree": "2", "pipeline.stages": "2"}, {"tp.degree": "4", "pipeline.stages": "2"},
		{"pipeline.stages": "4"}, {"tp.degree": "8"}, {},
	} {
		stages, _ := strconv.Atoi(k["pipeline.stages"])
		tp, _ := strconv.Atoi(k["tp.degree"])
		assert.Equal(t, 4*RankParams("gpt", params, describe, stages, tp), s.ModelStatesFor(params, k).Weights, "%v", k)
	}
	assert.Equal(t, int64(params), RankParams("gpt", params, describe, 1, 1))
	assert.Equal(t, int64(25_557_032/4), RankParams("resnet50", 25_557_032, map[string]int{"image_size": 224}, 4, 1))
}
