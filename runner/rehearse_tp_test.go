package runner

import (
	"testing"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestChecksumsDisagreeTP: with tp 2 x dp 2 (ranks t + 2d) the replicas of
// a shard (ranks 1 and 3) must agree, and so must the tensor ranks, whose
// checksums are of the model gathered over the tensor group.
func TestChecksumsDisagreeTP(t *testing.T) {
	sp := &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 4}, TP: &engine.TPConfig{Degree: 2}}}}
	rk := func(hashes ...string) []store.RankRecord {
		var out []store.RankRecord
		for i, h := range hashes {
			out = append(out, store.RankRecord{Rank: i, Checksum: &engine.Checksum{Hash: h}})
		}
		return out
	}
	assert.Empty(t, checksumsDisagree(sp, rk("g", "g", "g", "g")))
	got := checksumsDisagree(sp, rk("g", "g", "g", "xx"))
	assert.Contains(t, got, "the data-parallel replicas of tensor rank 1 (tp.degree 2)")
	assert.Contains(t, got, "rank 1 g")
	assert.Contains(t, got, "rank 3 xx")
	assert.Contains(t, checksumsDisagree(sp, rk("t0", "t1", "t0", "t1")), "the gathered parameters differ across the tensor-parallel group")
	sp.Configs[0].TP = &engine.TPConfig{Degree: 4} // one replica per shard: the gather is still compared
	assert.Empty(t, checksumsDisagree(sp, rk("a", "a", "a", "a")))
	assert.Contains(t, checksumsDisagree(sp, rk("a", "a", "b", "a")), "rank 0 a (sum 0), rank 2 b")
}

// TestCheckRehearsalFitTP: a tensor-parallel trial is described as the whole
// model (the estimate takes a tensor rank's share itself), its ranks estimated
// smaller than data parallel's, and a refusal names the tensor layout.
func TestCheckRehearsalFitTP(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny, micro_batch: 2}\nworkload: {device: cpu, ranks: 4}\n"+
		"sweep: {strategy: grid, knobs: {tp.degree: [1, 2, 4]}}\n")
	require.Len(t, p.Trials, 3)
	m := &Machine{Device: "cpu", Rehearse: true}
	// Most of the parameters in the blocks (8 x 12 x 1024^2 of 2^27), as in
	// a real GPT: the tensor share, not the tensor groups' process overhead
	// (tpProcessBytes), decides.
	d := engine.Description{Family: "gpt", Params: 1 << 27, Shapes: map[string]int{"layers": 8, "hidden": 1024, "seq_len": 64, "vocab": 256, "positions": 256}}
	var described []*engine.TPConfig
	describe := func(c engine.Config) (engine.Description, error) {
		described = append(described, c.TP)
		return d, nil
	}
	fit, err := CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: 1 << 50}), false)
	require.NoError(t, err)
	assert.Equal(t, []*engine.TPConfig{nil, nil, nil}, described, "described without tp")
	e1, e2, e4 := fit.Estimates[p.Trials[0].ID], fit.Estimates[p.Trials[1].ID], fit.Estimates[p.Trials[2].ID]
	assert.Greater(t, e1, e2)
	assert.Greater(t, e2, e4)
	assert.Contains(t, fit.Rows[2].Layout, "tp 4")

	_, err = CheckRehearsalFit(s, p, m, describe, m.RehearsalTarget(store.Host{MemBytes: uint64(3 * e4)}), false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tensor parallel 4 x data parallel 1 x 1 stages")
}

// TestChecksumsDisagreeTPPipeline: tp 2 x pp 2 (ranks tensor-fastest, then
// data, then pipeline): each stage's checksum is of its parameters gathered
// over its tensor group, so the tensor ranks of a stage agree and the stages
// differ.
func TestChecksumsDisagreeTPPipeline(t *testing.T) {
	sp := &trialSpec{Configs: []engine.Config{{Dist: engine.DistConfig{WorldSize: 4}, TP: &engine.TPConfig{Degree: 2},
		Pipeline: engine.PipelineConfig{Stages: 2}}}}
	rk := func(hashes ...string) []store.RankRecord {
		var out []store.RankRecord
		for i, h := range hashes {
			out = append(out, store.RankRecord{Rank: i, Checksum: &engine.Checksum{Hash: h},
				Info: &engine.Info{Pipeline: &engine.PipelineInfo{Stages: 2, Stage: i / 2}}})
		}
		return out
	}
	assert.Empty(t, checksumsDisagree(sp, rk("s0", "s0", "s1", "s1")))
	assert.Contains(t, checksumsDisagree(sp, rk("s0", "s0", "s1", "xx")), "the gathered parameters differ across the tensor-parallel group")
}

// The fp32 runs of a tensor-parallel trial in bf16: its twin at a smaller
// micro-batch (the trial's does not fit in fp32) runs without the full-batch
// fp32 one-rank run, which is not launched (it would not fit either: the
// review of 2026-12-07 found the twin waiting on it, so never launched).
func TestRehearsalFP32RunsTP(t *testing.T) {
	ok, failed := &store.RehearsalLaunch{Outcome: store.OK}, &store.RehearsalLaunch{Outcome: store.Failed}
	cases := []struct {
		name                string
		p                   string
		ref                 *store.RehearsalLaunch
		tp16                bool
		twinMB              int
		noise               *store.RehearsalLaunch
		wantNoise, wantTwin bool
	}{
		{"data parallel bf16", "bf16", ok, false, 0, ok, true, false},
		{"data parallel fp32", "fp32", ok, false, 0, nil, false, false},
		{"reference failed", "bf16", failed, false, 0, nil, false, false},
		{"tp bf16, twin at the trial's micro-batch", "bf16", ok, true, 0, ok, true, true},
		{"tp bf16, its full-batch fp32 run failed", "bf16", ok, true, 0, failed, true, false},
		{"tp bf16, twin at a smaller micro-batch", "bf16", ok, true, 4, nil, false, true},
		{"tp bf16, twin smaller, the bf16 reference failed", "bf16", failed, true, 4, nil, false, true},
	}
	for _, c := range cases {
		assert.Equal(t, c.wantNoise, wantNoiseReference(c.p, c.ref, c.tp16, c.twinMB), "%s: the fp32 one-rank run", c.name)
		assert.Equal(t, c.wantTwin, wantTwin(c.tp16, c.twinMB, c.noise), "%s: the fp32 twin", c.name)
	}
}
