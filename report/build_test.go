package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

func TestHeadline(t *testing.T) {
	baseID, bestID := fixID(knobs("fp32", "16")), fixID(knobs("bf16", "64"))
	tests := []struct {
		description string
		edit        func(*store.Run)
		status      string
		best        string
		check       func(*testing.T, *Summary)
	}{
		{"speedup of the best over the baseline", func(*store.Run) {}, HeadlineSpeedup, bestID, func(t *testing.T, s *Summary) {
			sp := s.Headline.Speedup
			require.NotNil(t, sp)
			assert.InDelta(t, 1.89, sp.Ratio, 0.05) // 1.62 × 1.17 crafted
			assert.True(t, sp.Significant)
			assert.Less(t, sp.Lo, sp.Ratio)
			assert.Greater(t, sp.Hi, sp.Ratio)
			assert.Equal(t, map[string]string{"precision": "bf16", "micro_batch": "64"}, s.Headline.BestKnobs)
		}},
		{"the baseline failed", func(r *store.Run) { r.Trials[0].Outcome, r.Trials[0].Error = store.Crashed, "rank 0 SIGSEGV" },
			HeadlineNoBaseline, bestID, func(t *testing.T, s *Summary) {
				assert.Nil(t, s.Headline.Speedup)
				assert.Contains(t, s.Headline.Text, "baseline trial did not finish")
			}},
		{"nothing beat the baseline", func(r *store.Run) {
			for i := 1; i < len(r.Trials); i++ {
				r.Trials[i].Outcome = store.Failed
			}
		}, HeadlineSpeedup, baseID, func(t *testing.T, s *Summary) {
			assert.True(t, s.Headline.BestIsBase)
			assert.Nil(t, s.Headline.Speedup)
		}},
		{"objective step time: speedup is baseline over best step time", func(r *store.Run) {
			r.Manifest.Objective = store.Objective{Metric: "step_time", Goal: "min"}
		}, HeadlineSpeedup, bestID, func(t *testing.T, s *Summary) {
			require.NotNil(t, s.Headline.Speedup)
			assert.Greater(t, s.Headline.Speedup.Ratio, 1.5)
		}},
		{"a planned trial without a record is not_run", func(r *store.Run) { r.Trials = r.Trials[:len(r.Trials)-1] },
			HeadlineSpeedup, bestID, func(t *testing.T, s *Summary) {
				last := s.Trials[len(s.Trials)-1]
				assert.Equal(t, NotRun, last.Outcome)
				assert.Contains(t, last.Error, "--resume")
				assert.Equal(t, 1, s.Counts[string(NotRun)])
			}},
		{"unknown objective metric: ranked by throughput, with a warning", func(r *store.Run) {
			r.Manifest.Objective.Metric = "joules"
		}, HeadlineSpeedup, bestID, func(t *testing.T, s *Summary) {
			require.NotEmpty(t, s.Warnings)
			assert.Contains(t, s.Warnings[0], "joules")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			run := readFixture(t, "runs/bert-grid")
			tt.edit(run)
			s := Build(run, nil)
			assert.Equal(t, tt.status, s.Headline.Status)
			assert.Equal(t, tt.best, s.Headline.Best)
			assert.Equal(t, []string{"precision", "micro_batch"}, s.SweptKnobs)
			tt.check(t, s)
		})
	}
}

func TestSingleRepeatUsesSteps(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-pipeline"), nil)
	for _, tr := range okTrials(s) {
		assert.Equal(t, "steps", string(tr.Samples.Source))
		assert.Equal(t, 24, tr.Throughput.N)
		assert.True(t, tr.Throughput.Bounded())
		require.NotNil(t, tr.Breakdown)
		assert.Greater(t, tr.Breakdown.BubbleMS, 0.0, "pipeline fixture has a bubble")
	}
}

func TestWarningsGrouped(t *testing.T) {
	run := readFixture(t, "runs/bert-grid")
	for i := range run.Trials {
		if len(run.Trials[i].Repeats) > 3 {
			run.Trials[i].Repeats = run.Trials[i].Repeats[:3]
		}
	}
	s := Build(run, nil)
	warns := allWarnings(s)
	assert.Contains(t, warns, "need >= 6 samples for confidence interval at level 0.95 (5 trials: "+
		strings.Join([]string{fixID(knobs("fp32", "16")), fixID(knobs("fp32", "32")), fixID(knobs("bf16", "16")),
			fixID(knobs("bf16", "32")), fixID(knobs("bf16", "64"))}, ", ")+")")
	require.NotNil(t, s.Headline.Speedup)
	assert.Contains(t, s.Headline.Text, "no confidence interval: too few samples")
}
