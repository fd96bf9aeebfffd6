package report

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
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
			sp := s.Headline.Comparison
			require.NotNil(t, sp)
			assert.InDelta(t, 1.89, sp.Ratio, 0.05) // 1.62 × 1.17 crafted
			assert.Equal(t, stats.Better, sp.Verdict)
			assert.Less(t, sp.Lo, sp.Ratio)
			assert.Greater(t, sp.Hi, sp.Ratio)
			// best of 4 compared trials: the headline's interval is Bonferroni-corrected
			assert.Equal(t, 4, s.Headline.Comparisons)
			assert.InDelta(t, 1-0.05/4, sp.Confidence, 1e-12)
			assert.Contains(t, s.Headline.Text, "faster")
			assert.Contains(t, s.Headline.Text, "corrected for picking the best of 4 trials")
			assert.Equal(t, map[string]string{"precision": "bf16", "micro_batch": "64"}, s.Headline.BestKnobs)
			// the per-trial comparison of the same pair is at the run's level
			best := s.Trials[5]
			require.Equal(t, bestID, best.ID)
			require.NotNil(t, best.VsBaseline)
			assert.InDelta(t, 0.95, best.VsBaseline.Confidence, 1e-12)
			assert.InDelta(t, sp.Ratio, best.VsBaseline.Ratio, 1e-12)
			assert.Less(t, sp.Lo, best.VsBaseline.Lo, "the corrected interval is wider")
		}},
		{"the baseline failed", func(r *store.Run) { r.Trials[0].Outcome, r.Trials[0].Error = store.Crashed, "rank 0 SIGSEGV" },
			HeadlineNoBaseline, bestID, func(t *testing.T, s *Summary) {
				assert.Nil(t, s.Headline.Comparison)
				assert.Contains(t, s.Headline.Text, "baseline trial did not finish")
			}},
		{"nothing beat the baseline", func(r *store.Run) {
			for i := 1; i < len(r.Trials); i++ {
				r.Trials[i].Outcome = store.Failed
			}
		}, HeadlineSpeedup, baseID, func(t *testing.T, s *Summary) {
			assert.True(t, s.Headline.BestIsBase)
			assert.Nil(t, s.Headline.Comparison)
		}},
		{"objective step time: speedup is baseline over best step time", func(r *store.Run) {
			r.Manifest.Objective = store.Objective{Metric: "step_time", Goal: "min"}
		}, HeadlineSpeedup, bestID, func(t *testing.T, s *Summary) {
			require.NotNil(t, s.Headline.Comparison)
			assert.Greater(t, s.Headline.Comparison.Ratio, 1.5)
			assert.Equal(t, "ms", s.Metric.Unit)
			assert.Equal(t, "ms", s.Headline.Unit)
		}},
		{"objective memory: the least memory is best", func(r *store.Run) {
			r.Manifest.Objective = store.Objective{Metric: "memory", Goal: "min"}
		}, HeadlineSpeedup, baseID, func(t *testing.T, s *Summary) {
			// micro_batch 16, 32, 64 peak at 16, 20, 28 GiB: the baseline (fp32/16) ties with
			// bf16/16 and comes first in plan order; throughput would pick bf16/64
			assert.Equal(t, "bytes", s.Metric.Unit)
			assert.True(t, s.Headline.BestIsBase)
			for _, tr := range s.Trials {
				if tr.VsBaseline != nil && tr.Knobs["micro_batch"] == "32" {
					assert.Equal(t, stats.Worse, tr.VsBaseline.Verdict, tr.VsBaseline.Text())
					assert.Contains(t, tr.VsBaseline.VerdictText(), "more memory")
				}
			}
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

// TestSingleLaunchIsAnEstimate: with one launch a trial has its number and
// no interval, its comparison no p-value and no verdict, however many steps
// it measured (steps are not replicates).
func TestSingleLaunchIsAnEstimate(t *testing.T) {
	s := Build(readFixture(t, "runs/gpt-pipeline"), nil)
	for _, tr := range okTrials(s) {
		assert.Equal(t, 1, tr.Value.N)
		assert.False(t, tr.Value.Bounded())
		assert.Contains(t, tr.Warnings, "one launch: estimate only, no interval and no p-value (run repeats: 3 or more, or repeats: auto)")
		require.NotNil(t, tr.Breakdown)
		assert.Greater(t, tr.Breakdown.BubbleMS, 0.0, "pipeline fixture has a bubble")
		if c := tr.VsBaseline; c != nil {
			assert.Equal(t, stats.Undecided, c.Verdict)
			assert.True(t, math.IsNaN(c.P))
			assert.Equal(t, "undecided (one launch: estimate only)", c.VerdictText())
		}
	}
	require.NotNil(t, s.Headline.Comparison)
	assert.Contains(t, s.Headline.Text, "undecided (one launch: estimate only)")
}

func TestWarningsGrouped(t *testing.T) {
	run := readFixture(t, "runs/bert-grid")
	for i := range run.Trials {
		if len(run.Trials[i].Repeats) > 1 {
			run.Trials[i].Repeats = run.Trials[i].Repeats[:1]
		}
	}
	s := Build(run, nil)
	warns := allWarnings(s)
	assert.Contains(t, warns, "one launch: estimate only, no interval and no p-value (run repeats: 3 or more, or repeats: auto) (5 trials: "+
		strings.Join([]string{fixID(knobs("fp32", "16")), fixID(knobs("fp32", "32")), fixID(knobs("bf16", "16")),
			fixID(knobs("bf16", "32")), fixID(knobs("bf16", "64"))}, ", ")+")")
}

// TestThreeLaunchesDecide: the brief's case: 3 launches a side, a 24% win
// whose every launch beats every baseline launch is decided faster (a rank
// test cannot go below p = 0.1 there).
func TestThreeLaunchesDecide(t *testing.T) {
	run := readFixture(t, "runs/bert-grid")
	for i := range run.Trials {
		if len(run.Trials[i].Repeats) > 3 {
			run.Trials[i].Repeats = run.Trials[i].Repeats[:3]
		}
	}
	s := Build(run, nil)
	for _, tr := range okTrials(s) {
		if tr.Baseline || tr.Knobs["precision"] != "bf16" {
			continue
		}
		require.NotNil(t, tr.VsBaseline)
		assert.Equal(t, stats.Better, tr.VsBaseline.Verdict, "%s: %s", tr.ID, tr.VsBaseline.Text())
		assert.GreaterOrEqual(t, tr.VsBaseline.MannWhitneyP, 0.1, "the rank test's floor at 3 vs 3")
	}
}
