package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// TestRehearsalTPChecksums: a tensor-parallel rehearsal compares the
// data-parallel replicas of each tensor shard (rank = t + tp*d), then the
// tensor ranks (each checksum is of the gathered model): tp 2 x dp 2.
func TestRehearsalTPChecksums(t *testing.T) {
	losses := []float64{10, 9, 8}
	ranks := func(hashes ...string) []store.RankRecord {
		var out []store.RankRecord
		for i, h := range hashes {
			out = append(out, rehearsalRank(i, h, losses, 1<<30, nil, "fp32"))
		}
		return out
	}
	rec := func(id string, hashes ...string) store.TrialRecord {
		return store.TrialRecord{ID: id, Outcome: store.OK, FailedRank: -1, Knobs: map[string]string{"tp.degree": "2"},
			Rehearsal: &store.RehearsalTrial{Ranks: 4, DataPar: 2, TensorPar: 2, Stages: 1, MicroBatch: 4},
			Repeats:   []store.RepeatRecord{{Outcome: store.OK, Ranks: ranks(hashes...)}}}
	}
	s := Build(rehearsalRun(rec("good", "g", "g", "g", "g"), rec("bad", "g", "g", "g", "c"), rec("gather", "a", "b", "a", "b")), nil)
	require.Len(t, s.Rehearsal.Trials, 3)
	got := map[string]RehearsalTrial{}
	for _, rt := range s.Rehearsal.Trials {
		got[rt.ID] = rt
	}
	good, bad := got["good"], got["bad"]
	require.NotNil(t, good.Checksums.DataParallelEqual)
	assert.True(t, *good.Checksums.DataParallelEqual, good.Checksums.Detail)
	assert.Contains(t, good.Checksums.Detail, "the 2 tensor ranks x 2 data-parallel replicas hold bit-identical parameters")
	assert.Equal(t, 2, good.TensorPar)
	require.NotNil(t, bad.Checksums.DataParallelEqual)
	assert.False(t, *bad.Checksums.DataParallelEqual)
	assert.Contains(t, bad.Checksums.Detail, "tensor rank 1: replica 1 (rank 3) differs from replica 0 (rank 1)")
	gather := got["gather"]
	assert.False(t, *gather.Checksums.DataParallelEqual, "replicas agree, the tensor ranks' gathered models do not")
	assert.Contains(t, gather.Checksums.Detail, "tensor rank 1 (rank 1) gathered other parameters than tensor rank 0 (rank 0)")
	assert.Contains(t, good.Paths, "tensor-parallel layers over groups of 2 ranks")
	lines := rehearsalLines(&good)
	assert.Contains(t, lines[0][1], "tensor parallel 2 x data parallel 2 x 1 stages")

	one := rehearsalTPChecksums(ranks("a", "a"), 2, 1, 1)
	require.NotNil(t, one.DataParallelEqual, "tp 2 on 2 ranks: the two tensor ranks are compared")
	assert.True(t, *one.DataParallelEqual)
	assert.False(t, *rehearsalTPChecksums(ranks("a", "b"), 2, 1, 1).DataParallelEqual)
	pp := rehearsalTPChecksums(ranks("a", "a", "a", "a", "c", "c", "c", "e"), 2, 2, 2)
	require.NotNil(t, pp.ReplicasEqual)
	assert.False(t, *pp.ReplicasEqual)
	assert.Contains(t, pp.Detail, "stage 1, tensor rank 1: replica 1 (rank 7) differs from replica 0 (rank 5)")
	assert.True(t, *rehearsalTPChecksums(ranks("a", "a", "a", "a", "c", "c", "c", "c"), 2, 2, 2).ReplicasEqual, "stages differ, each agrees")
}
