package runner

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/study"
	"github.com/stretchr/testify/assert"
)

// TestRankEstimateTPZero: tensor parallelism x ZeRO. A rank holds its tensor
// share of the weights (1/tp of the sharded ones, every replicated one), and
// ZeRO divides that share's optimizer states (and with stage 2 its gradients)
// over the data-parallel group, dp = ranks / tp: BERT-large, 8 ranks, tp 2,
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
	assert.Equal(t, 4*share-ceil(4*share), tp1-tp2, "zero 2: and the gradients")
}
