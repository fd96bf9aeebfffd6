package runner

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
	"github.com/stretchr/testify/assert"
)

// TestReferenceConfigTP: the one-rank reference of a tensor-parallel trial
// runs without tp (one rank has no tensor group; the engine refuses tp on a
// world of one) and trains the data-parallel ranks' global batch: at tp 2 on
// 8 ranks, 4 data-parallel ranks of micro-batch 2.
func TestReferenceConfigTP(t *testing.T) {
	c := engine.Config{MicroBatch: 2, GradAccum: 1, Precision: "bf16", Dist: engine.DistConfig{Rank: 5, WorldSize: 8},
		TP: &engine.TPConfig{Degree: 2, SequenceParallel: true}}
	ref := referenceConfig(c)
	assert.Nil(t, ref.TP)
	assert.Equal(t, 8, ref.MicroBatch, "micro-batch 2 x 4 data-parallel ranks (8 ranks / tp 2)")
	assert.Equal(t, engine.DistConfig{WorldSize: 1}, ref.Dist)
	c.TP.Degree = 8
	assert.Equal(t, 2, referenceConfig(c).MicroBatch, "tp 8 on 8 ranks: one data-parallel rank")
	assert.NotNil(t, c.TP, "the trial's own config is left alone")

	sp := &trialSpec{Ranks: 8, Configs: []engine.Config{c}}
	dp, stages, micro := layoutOf(sp)
	assert.Equal(t, []int{1, 1, 2}, []int{dp, stages, micro})
	assert.Contains(t, pathKey(sp), "tp 8 with sequence parallel")
	c.TP = &engine.TPConfig{Degree: 2}
	sp.Configs[0] = c
	assert.Contains(t, pathKey(sp), "dp 4 x pp 1")
	assert.NotContains(t, pathKey(sp), "sequence parallel")
}

// TestChecksumsDisagreeTP: with tp 2 x dp 2 (ranks t + 2d) the shards of
// tensor ranks 0 and 1 differ by design; the replicas of one shard (ranks
// 1 and 3) must not.
func TestChecksumsDisagreeTP(t *testing.T) {
	sp := &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 4}, TP: &engine.TPConfig{Degree: 2}}}}
	rk := func(hashes ...string) []store.RankRecord {
		var out []store.RankRecord
		for i, h := range hashes {
			out = append(out, store.RankRecord{Rank: i, Checksum: &engine.Checksum{Hash: h}})
		}
		return out
	}
	assert.Empty(t, checksumsDisagree(sp, rk("t0", "t1", "t0", "t1")), "shards differ, replicas agree")
	got := checksumsDisagree(sp, rk("t0", "t1", "t0", "xx"))
	assert.Contains(t, got, "the data-parallel replicas of tensor rank 1 (tp.degree 2)")
	assert.Contains(t, got, "rank 1 t1")
	assert.Contains(t, got, "rank 3 xx")
	sp.Configs[0].TP = nil // without tp every rank must agree
	assert.Contains(t, checksumsDisagree(sp, rk("t0", "t1", "t0", "t1")), "data-parallel ranks")
	sp.Configs[0].TP = &engine.TPConfig{Degree: 4} // one replica per shard
	assert.Empty(t, checksumsDisagree(sp, rk("a", "b", "c", "d")))
}
