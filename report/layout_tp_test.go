package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// TestLayoutAndRankMemory: a tensor-parallel trial's layout (tp x dp x pp)
// and each rank's memory reach report.md; plain data parallel shards nothing
// and gets neither.
func TestLayoutAndRankMemory(t *testing.T) {
	rec := func(knobs map[string]string) *store.TrialRecord {
		r := &store.TrialRecord{ID: "t", Outcome: store.OK, Knobs: knobs}
		rp := store.RepeatRecord{Outcome: store.OK}
		for k := 0; k < 8; k++ {
			rk := store.RankRecord{Rank: k, Info: &engine.Info{Device: "cuda", WorldSize: 8}}
			rk.Steps = []engine.StepMetrics{{MemPeakBytes: int64(10+k) << 30, MemReservedBytes: int64(12+k) << 30}}
			rp.Ranks = append(rp.Ranks, rk)
		}
		r.Repeats = []store.RepeatRecord{rp}
		return r
	}
	tp := rec(map[string]string{"tp.degree": "2", "tp.sequence_parallel": "true", "pipeline.stages": "1", "zero.stage": "0"})
	l := layoutOf(tp)
	require.NotNil(t, l)
	assert.Equal(t, Layout{World: 8, TP: 2, DP: 4, PP: 1, SP: true}, *l)
	assert.Equal(t, "tp 2 (sequence parallel) x dp 4 x pp 1", l.String())
	z := layoutOf(rec(map[string]string{"zero.stage": "1"}))
	require.NotNil(t, z)
	assert.Equal(t, "tp 1 x dp 8 x pp 1, zero.stage 1", z.String())
	assert.Nil(t, layoutOf(rec(map[string]string{"tp.degree": "1"})), "plain data parallel shards nothing")

	tr := &Trial{ID: "t", Label: "tp.degree=2", Memory: memoryOf(tp), Layout: l}
	var b strings.Builder
	writeRankMemoryMD(&b, []*Trial{tr, {ID: "d", Memory: memoryOf(rec(nil))}})
	md := b.String()
	assert.Contains(t, md, "## Memory per rank (tensor parallel and ZeRO trials)")
	assert.Contains(t, md, "| tp.degree=2 | t | tp 2 (sequence parallel) x dp 4 x pp 1 | rank 0 12.0 GiB / 10.0 GiB; rank 1 13.0 GiB / 11.0 GiB;")
	assert.Contains(t, md, "rank 7 19.0 GiB / 17.0 GiB |")
	assert.NotContains(t, md, "| d |", "no layout: not listed")
	assert.Contains(t, memTip(tr), "tp 2 (sequence parallel) x dp 4 x pp 1; held")
	b.Reset()
	writeRankMemoryMD(&b, []*Trial{{ID: "d", Memory: memoryOf(rec(nil))}})
	assert.Empty(t, b.String())
}
