package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

const autoStudy = `name: runner-auto
model: {family: gpt, preset: tiny, seq_len: 16, micro_batch: 1}
workload: {device: cpu, ranks: 1, warmup_steps: 0, steps: 6, repeats: auto, min_repeats: 3, max_repeats: 6, timeout: 30s}
sweep:
  strategy: one-at-a-time
  knobs: {micro_batch: [1, 4]}
`

// TestAutoStopsWhenDecided: micro_batch 4 moves 4x the samples of the
// baseline per (equal) step: decided faster at the first look, after 3
// launches each; both trials stop there, committed with why. The fake
// engine's steps take exactly 5 ms by its own clock, but the window's wall
// clock (the launch's value since windows by time) wanders by tens of
// percent on a loaded test machine, so this test of the schedule reads the
// launches on the summed step times.
func TestAutoStopsWhenDecided(t *testing.T) {
	f := newFixture(t, autoStudy)
	o := f.options()
	o.measured = func(r *store.RepeatRecord) {
		if r.Outcome == store.OK {
			r.SamplesPerS, r.TokensPerS = measure.Throughput(r.Ranks)
		}
	}
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		assert.Equal(t, store.OK, tr.Outcome, tr.Error)
		assert.Len(t, tr.Repeats, 3, "%s: decided at the first look", tr.ID)
		if len(tr.Changed) == 0 {
			assert.Equal(t, stats.StopNeeded, tr.Stopped, "the baseline")
		} else {
			assert.Equal(t, stats.StopDecided, tr.Stopped)
		}
		require.NotNil(t, tr.Summary)
		assert.Equal(t, 3, tr.Summary.Launches)
		assert.Equal(t, "samples/s", tr.Summary.Unit)
	}
}

// TestTaintedLaunchesRelaunched: a tainted launch is kept in the record,
// left out of the statistics and replaced, at most twice per trial.
func TestTaintedLaunchesRelaunched(t *testing.T) {
	for _, tc := range []struct {
		name          string
		taint         func(n int) bool // the n-th launch of a trial (from 0)
		repeats, want int              // launches recorded, clean ones
	}{
		{"first launch tainted", func(n int) bool { return n == 0 }, 3, 2},
		{"every launch tainted: two relaunches, then go on", func(int) bool { return true }, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, repeatStudy)
			o := f.options()
			seen := map[string]int{}
			o.measured = func(r *store.RepeatRecord) {
				if tc.taint(seen[repeatKey(r)]) {
					r.Tainted = "thermal slowdown 3.1% of the measured window"
				}
				seen[repeatKey(r)]++
			}
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			for _, tr := range run.Trials {
				assert.Equal(t, store.OK, tr.Outcome)
				assert.Len(t, tr.Repeats, tc.repeats)
				assert.Equal(t, tc.want, measure.CleanLaunches(tr.Repeats))
				if tc.want > 0 {
					assert.Equal(t, tc.want, tr.Summary.Launches)
				}
			}
		})
	}
}

// repeatKey identifies a launch's trial in the measured hook (the fake
// engine's micro-batch is its samples per step).
func repeatKey(r *store.RepeatRecord) string {
	if len(r.Ranks) == 0 || len(r.Ranks[0].Steps) == 0 {
		return ""
	}
	return string(rune('0' + r.Ranks[0].Steps[0].Samples))
}

// TestTimeBudget: no round starts that would end past workload.max_time;
// every trial is committed with what it measured.
func TestTimeBudget(t *testing.T) {
	f := newFixture(t, `name: runner-budget
model: {family: gpt, preset: tiny, seq_len: 16, micro_batch: 1}
workload: {device: cpu, ranks: 1, warmup_steps: 0, steps: 2, repeats: 50, max_time: 1s, timeout: 30s}
sweep:
  strategy: one-at-a-time
  knobs: {micro_batch: [1, 2]}
`)
	run, err := f.run(t, context.Background(), f.options())
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		assert.Equal(t, store.OK, tr.Outcome)
		assert.Equal(t, stats.StopBudget, tr.Stopped)
		assert.Less(t, len(tr.Repeats), 50)
	}
}

// TestPreheat: one unmeasured launch before the first measured one, with
// its own logs and no repeat: no statistic sees it. Its timeline is kept
// with the trial it pre-heated, and the first measured launch starts where
// it ended, so the run's timelines still add up to its wall time.
func TestPreheat(t *testing.T) {
	f := newFixture(t, strings.Replace(repeatStudy, "steps: 2,", "steps: 8,", 1))
	o := f.options()
	d := DesignFor(f.study, "cuda") // as on a GPU
	o.Design = &d
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	total := 0
	var preheat []string
	for _, tr := range run.Trials {
		total += len(tr.Repeats)
		if _, err := os.Stat(filepath.Join(f.w.Dir, store.LogName(tr.ID, 0, store.PreheatRepeat))); err == nil {
			preheat = append(preheat, tr.ID)
		}
	}
	assert.Equal(t, 4, total, "2 trials x 2 repeats: the pre-heat launch is not a repeat")
	require.Len(t, preheat, 1, "one pre-heat launch")
	log, err := os.ReadFile(filepath.Join(f.w.Dir, store.LogName(preheat[0], 0, store.PreheatRepeat)))
	require.NoError(t, err)
	assert.Contains(t, string(log), "0 warm-up + 5 steps)", "the pre-heat stops after preheatSteps steps")
	log, err = os.ReadFile(filepath.Join(f.w.Dir, store.LogName(preheat[0], 0, 0)))
	require.NoError(t, err)
	assert.Contains(t, string(log), "0 warm-up + 8 steps)", "a measured launch runs the study's steps")

	var pre *store.Timeline
	first := time.Time{}
	for _, tr := range run.Trials {
		if tr.Preheat != nil {
			assert.Nil(t, pre, "one record holds the pre-heat")
			assert.Equal(t, preheat[0], tr.ID, "the trial that was pre-heated")
			pre = tr.Preheat
		}
		assert.Equal(t, 2, measure.CleanLaunches(tr.Repeats))
		for _, rp := range tr.Repeats {
			if first.IsZero() || rp.Timeline.Start.Before(first) {
				first = rp.Timeline.Start
			}
		}
	}
	require.NotNil(t, pre, "the pre-heat's timeline is kept")
	assert.Positive(t, pre.PhaseMS(timeline.PhaseMeasured), "the pre-heat ran its steps")
	assert.Equal(t, pre.End, first, "the first measured launch starts where the pre-heat ended")
	s := timeline.Summarize(run)
	require.NotNil(t, s)
	assert.Equal(t, 4, s.Launches, "the pre-heat is not a launch of the statistics")
	assert.InDelta(t, pre.WallMS(), phaseMS(s.Phases, timeline.PhasePreheat), 1e-9)
	assert.Equal(t, timeline.PhasePreheat, s.Phases[0].Name, "first in the run's phases")
	sum := 0.0
	for _, p := range s.Phases {
		sum += p.MS
	}
	assert.InDelta(t, s.WallMS, sum, 1, "the phases cover the run, the pre-heat included")
}

func phaseMS(ps []store.Phase, name string) float64 {
	for _, p := range ps {
		if p.Name == name {
			return p.MS
		}
	}
	return 0
}
