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

// TestRehearsalTPTwinFP32: a tensor-parallel trial in bf16 is judged by its
// fp32 twin against one rank in fp32 (1e-5), its bf16 distance from one rank
// shown beside it (the GPT-2 350M tp 2 H100 rehearsal: 1.0e-4, which the
// one-rank bf16 gap of 3e-5 does not cover); a twin off by more than 1e-5
// fails; without a twin that ran the layout is not checked (fails closed).
func TestRehearsalTPTwinFP32(t *testing.T) {
	trial := []float64{10.80293, 9.775615, 9.250983}
	ranks := []store.RankRecord{rehearsalRank(0, "a", trial, 1<<30, nil, "bf16"), rehearsalRank(1, "a", trial, 1<<30, nil, "bf16")}
	steps := []int{0, 1, 2}
	knobs := map[string]string{"tp.degree": "2"}
	info := func(twin *store.RehearsalLaunch) *store.RehearsalTrial {
		return &store.RehearsalTrial{Ranks: 2, DataPar: 1, TensorPar: 2, Stages: 1,
			Reference:      &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.803767, 9.776604, 9.251884}, Steps: steps},
			NoiseReference: &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.80385, 9.776834, 9.252161}, Steps: steps},
			TwinFP32:       twin}
	}
	l := rehearsalLosses(ranks, info(&store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.80386, 9.776830, 9.252170}, Steps: steps}), knobs, 1)
	require.NotNil(t, l.Agree)
	assert.True(t, *l.Agree, l.Detail)
	assert.Contains(t, l.Detail, "in fp32 follows one rank in fp32 within 1e-5")
	assert.Contains(t, l.Detail, "(largest relative difference ")
	assert.Contains(t, l.Detail, "in bf16, shown, not judged: relative difference 0.0001 from one rank in bf16")
	assert.Equal(t, RehearsalFP32Tol, l.Tolerance)

	l = rehearsalLosses(ranks, info(&store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.8, 9.776830, 9.252170}, Steps: steps}), knobs, 1)
	require.NotNil(t, l.Agree)
	assert.False(t, *l.Agree, "the twin 2.6e-4 from one rank in fp32: the layout is wrong")
	assert.Contains(t, l.Detail, "outside 1e-5")

	// Not checked, failing closed, never judged by the one-rank bf16 noise
	// (which the row-parallel partial sums are known not to meet): a twin
	// that failed, was not run (fits at no micro-batch) or is absent.
	for _, twin := range []*store.RehearsalLaunch{{Outcome: store.OOM, Error: "CUDA out of memory"}, nil, {Outcome: store.Skipped, Error: "fits at no micro-batch"}} {
		l = rehearsalLosses(ranks, info(twin), knobs, 1)
		require.NotNil(t, l.Agree, l.Detail)
		assert.False(t, *l.Agree, "fails closed: %s", l.Detail)
		assert.True(t, l.NotChecked, l.Detail)
		assert.Contains(t, l.Detail, "so the layout is not checked")
		assert.NotContains(t, l.Detail, "twice the measured bf16 noise")
		assert.Equal(t, "NOT CHECKED: ", rhLossVerdict(l))
	}
	// The headline counts it as not checked, unless something else is wrong.
	tr := RehearsalTrial{Losses: l}
	assert.True(t, tr.wrong(), "fails closed")
	assert.True(t, tr.onlyNotChecked())
	tr.Checksums = &RehearsalChecksums{DataParallelEqual: new(bool)}
	assert.False(t, tr.onlyNotChecked(), "a checksum disagrees as well")
	assert.Contains(t, rehearsalLosses(ranks, info(&store.RehearsalLaunch{Outcome: store.OOM, Error: "CUDA out of memory"}), knobs, 1).Detail,
		"the fp32 twin failed (oom: CUDA out of memory)")
	assert.Contains(t, rehearsalLosses(ranks, info(&store.RehearsalLaunch{Outcome: store.Skipped, Error: "fits at no micro-batch"}), knobs, 1).Detail,
		"the fp32 twin was not run (fits at no micro-batch)")

	// The twin at a smaller micro-batch (the trial's 8 does not fit in
	// fp32): judged against one rank in fp32 of the twin's global batch
	// (TwinReference), not of the trial's (NoiseReference: other losses).
	small := info(&store.RehearsalLaunch{Outcome: store.OK, MicroBatch: 4, Losses: []float64{10.9, 9.8, 9.3}, Steps: steps})
	small.MicroBatch = 8
	l = rehearsalLosses(ranks, small, knobs, 1)
	assert.True(t, l.NotChecked, "no one-rank fp32 run of the twin's batch: %s", l.Detail)
	small.TwinReference = &store.RehearsalLaunch{Outcome: store.OK, MicroBatch: 4, Losses: []float64{10.90001, 9.8, 9.3}, Steps: steps}
	l = rehearsalLosses(ranks, small, knobs, 1)
	require.NotNil(t, l.Agree)
	assert.True(t, *l.Agree, l.Detail)
	assert.False(t, l.NotChecked)
	assert.Contains(t, l.Detail, "in fp32 at micro-batch 4 (the trial's 8 does not fit in fp32; the layout's arithmetic does not depend on the micro-batch) follows one rank in fp32 within 1e-5")
	small.TwinReference.Losses = []float64{10.91, 9.8, 9.3}
	l = rehearsalLosses(ranks, small, knobs, 1)
	assert.False(t, *l.Agree, "9e-4 off: the layout is wrong")
	assert.Equal(t, "DISAGREE: ", rhLossVerdict(l))

	l = rehearsalLosses(ranks, info(&store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.80386, 9.776830, 9.252170}, Steps: []int{5, 6, 7}}), knobs, 1)
	require.NotNil(t, l.Agree)
	assert.False(t, *l.Agree)
	assert.Contains(t, l.Detail, "not comparable")
}

// A rank's process memory outside the allocator is what the plan recorded
// with the trial (a tensor-parallel rank counts its communicators too);
// records from before it was recorded counted 512 MiB.
func TestRehearsalProcessBytesRecorded(t *testing.T) {
	assert.Equal(t, int64(832<<20), rehearsalProcessBytes(&store.RehearsalTrial{TensorPar: 2, ProcessBytes: 832 << 20}))
	assert.Equal(t, int64(512<<20), rehearsalProcessBytes(&store.RehearsalTrial{TensorPar: 2}))
}
