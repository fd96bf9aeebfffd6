package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func TestBehindNamesTheRankOthersWaitFor(t *testing.T) {
	rec := func(rank int, issued, completed int64, bucket int) store.RankRecord {
		return store.RankRecord{Rank: rank, Comm: &engine.CommProgress{Issued: issued, Completed: completed, Step: 3, Bucket: bucket}}
	}
	tests := []struct {
		description string
		ranks       []store.RankRecord
		rank        int
		contains    string
	}{
		{"a rank that has not issued its peers' collective (a stall before bucket 0)",
			[]store.RankRecord{rec(0, 7, 6, 0), rec(1, 6, 6, -1), rec(2, 7, 6, 0)}, 1,
			"rank 1 is behind: it issued 6 collectives and completed 6, at step 3, before its first bucket (completed/issued per rank: rank0=6/7 rank1=6/6 rank2=6/7)"},
		{"as many issued, fewer completed: the rank whose collective is stuck",
			[]store.RankRecord{rec(0, 7, 7, 1), rec(1, 7, 6, 1)}, 1, "rank 1 is behind: it issued 7 collectives and completed 6, at step 3, last bucket launched 1"},
		{"every rank alike", []store.RankRecord{rec(0, 7, 6, 1), rec(1, 7, 6, 1)}, -1,
			"no rank is behind: every rank issued 7 collectives and completed 6"},
		{"one rank reported", []store.RankRecord{rec(0, 7, 6, 1), {Rank: 1}}, -1, ""},
		{"two alike and one silent: not 'every rank' (audit, 2026-12-07: a hung rank 2 with no progress read 'no rank is behind: every rank issued 5')",
			[]store.RankRecord{rec(0, 5, 4, 1), rec(1, 5, 4, 1), {Rank: 2}}, -1,
			"the 2 ranks that reported issued 5 collectives and completed 4 (step 3, last bucket launched 1); rank 2 reported no communication progress"},
		{"one behind and one silent", []store.RankRecord{rec(0, 7, 6, 1), rec(1, 6, 6, 0), {Rank: 2}}, 1,
			"(completed/issued per rank: rank0=6/7 rank1=6/6 rank2=no progress reported)"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			rank, why := behind(tt.ranks)
			assert.Equal(t, tt.rank, rank)
			if tt.contains == "" {
				assert.Empty(t, why)
			} else {
				assert.Contains(t, why, tt.contains)
			}
		})
	}
}

func TestCommDeadlines(t *testing.T) {
	assert.Equal(t, 600000, commDeadlineMS(0), "no workload timeout: the engine's 10 minutes")
	assert.Equal(t, 600000, commDeadlineMS((30 * time.Minute).Milliseconds()))
	assert.Equal(t, 210000, commDeadlineMS((3 * time.Minute).Milliseconds()), "30 s past the trial's own timeout: the launch's limit ends a rank stuck before the warm step")
	assert.Equal(t, 60000, warmDeadlineMS(5, 600000), "at least 60 s")
	assert.Equal(t, 100000, warmDeadlineMS(20000, 600000), "5 x the warm step")
	assert.Equal(t, 600000, warmDeadlineMS(500000, 600000), "never above the initial deadline")
	assert.Equal(t, 90000, warmDeadlineMS(5, 90000), "a 1 min trial keeps its initial deadline: its own limit ends a hang first")
}

// TestStallFaultNamesTheRankBehind: rank 1 stalls before its first bucket at
// step 2; rank 0's collective gives up (a communication error) and the record
// names rank 1 as the rank behind, from the progress the heartbeats carried.
func TestStallFaultNamesTheRankBehind(t *testing.T) {
	f := newFixture(t, `name: runner-stall
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 1, timeout: 60s}
baseline: {precision: fp32}
sweep:
  strategy: list
  trials:
    - {fault.kind: stall, fault.rank: 1, fault.at_step: 2, fault.slow_ms: 30000}
`)
	o := f.options()
	o.Env = append(o.Env, fakeCommWaitEnv+"=1500") // the fake's peers give up after 1.5 s
	start := time.Now()
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	tr := run.Trials[0]
	assert.Equal(t, store.Failed, tr.Outcome)
	assert.Contains(t, tr.Error, "collective not finished after 1500 ms")
	assert.Contains(t, tr.Error, "communication: rank 1 is behind: it issued 4 collectives and completed 4, at step 2, before its first bucket")
	assert.Equal(t, 1, tr.FailedRank, "the rank behind, not the rank whose collective gave up")
	require.Len(t, tr.Repeats, 1)
	for _, r := range tr.Repeats[0].Ranks {
		require.NotNil(t, r.Comm, "rank %d's heartbeats carried its progress", r.Rank)
		assert.Equal(t, 90000, r.Comm.DeadlineMS, "rank %d: the runner set dist.timeout_ms from workload.timeout (60 s) and its 30 s margin; the warm step, 5 ms, gives no lower one", r.Rank)
	}
	assert.Less(t, time.Since(start), 30*time.Second, "ended by the collective's deadline, not the stall or the trial timeout")
	assert.False(t, strings.Contains(tr.Error, "exceeded its timeout"))
}
