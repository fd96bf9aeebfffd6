package study

import (
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

// TestModelStatesForTPPipeline: tp x pp divides a rank's model states by both
// (the tensor share, then an even share of the stages).
func TestModelStatesForTPPipeline(t *testing.T) {
	s := &Study{Model: Model{Family: "gpt", Preset: "350m"}, Workload: Workload{Device: "cuda", GPUs: 8}}
	const params = 354_823_168
	tp2 := s.ModelStatesFor(params, map[string]string{"tp.degree": "2"})
	pp2 := s.ModelStatesFor(params, map[string]string{"pipeline.stages": "2"})
	both := s.ModelStatesFor(params, map[string]string{"tp.degree": "2", "pipeline.stages": "2"})
	assert.InDelta(t, float64(tp2.Total())/2, float64(both.Total()), 16, "tp 2's share over 2 stages")
	assert.Less(t, both.Total(), pp2.Total()/2+pp2.Total()/50, "about half of pp 2's (the replicated parameters stay)")
	assert.Greater(t, both.Total(), pp2.Total()/2)
}
