package timeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func names(tl *store.Timeline) []string {
	var out []string
	for _, p := range tl.Phases {
		out = append(out, p.Name)
	}
	return out
}

func sum(tl *store.Timeline) float64 {
	s := 0.0
	for _, p := range tl.Phases {
		s += p.MS
	}
	return s
}

// Two ranks: each launch phase ends when the slower rank ended it; the
// engine's creation phases replace engine_create; phases add up to the wall
// time.
func TestLaunchTimelineTakesTheLastRank(t *testing.T) {
	marks := func(offset int) map[string]time.Time {
		return map[string]time.Time{MarkStarted: at(120 + offset), MarkJoined: at(130 + offset), MarkLoaded: at(600 + offset),
			MarkReleased: at(601 + offset), MarkCreated: at(2600 + offset), MarkReady: at(2700), MarkFirstStep: at(3000),
			MarkWarm: at(3200 + offset), MarkMeasured: at(4500 + offset), MarkFinished: at(4600 + offset)}
	}
	create := []store.Phase{{Name: "device_init", MS: 500}, {Name: "model_build", MS: 1200}}
	l := Launch{Start: at(0), CommitMS: 3, Prepare: at(10), Spawn: at(100), End: at(4800),
		Ranks: []Rank{{Spawn: at(100), Marks: marks(0), Exit: at(4700), Create: create},
			{Spawn: at(100), Marks: marks(20), Exit: at(4750), Create: create}}}
	tl := LaunchTimeline(l)
	assert.Equal(t, []string{PhaseCommit, PhaseSchedule, PhasePrepare, PhaseSpawn, PhaseRendezvous, PhaseEngineLoad, PhaseWaitPrevious,
		"create.device_init", "create.model_build", "create.other", PhaseStartBarrier, PhaseFirstStep, PhaseWarmup, PhaseMeasured,
		PhaseTeardown, PhaseExit, PhaseCollect}, names(tl))
	assert.InDelta(t, 4800, sum(tl), 1e-9)
	assert.InDelta(t, 4800, tl.WallMS(), 1e-9)
	assert.InDelta(t, 40, tl.PhaseMS(PhaseSpawn), 1e-9, "until the slower rank started")
	assert.InDelta(t, 4520-3220, tl.PhaseMS(PhaseMeasured), 1e-9)
	assert.InDelta(t, 2620-621-1700, tl.PhaseMS("create.other"), 1e-9)
	assert.InDelta(t, 50, tl.PhaseMS(PhaseCollect), 1e-9)

	r := RankTimeline(l.Ranks[0])
	assert.InDelta(t, 4600, sum(r), 1e-9)
	assert.Equal(t, PhaseExit, r.Phases[len(r.Phases)-1].Name)
}

// A rank that crashed while creating its engine: its last stretch is
// unfinished, the launch's phases stay in order and add up.
func TestTimelineOfACrash(t *testing.T) {
	r0 := Rank{Spawn: at(0), Marks: map[string]time.Time{MarkStarted: at(10), MarkJoined: at(20), MarkLoaded: at(500),
		MarkReleased: at(501), MarkCreated: at(900), MarkReady: at(950)}, Exit: at(1000)}
	r1 := Rank{Spawn: at(0), Marks: map[string]time.Time{MarkStarted: at(10), MarkJoined: at(30), MarkLoaded: at(520),
		MarkReleased: at(521)}, Exit: at(700)}
	rt := RankTimeline(r1)
	assert.Equal(t, PhaseUnfinished, rt.Phases[len(rt.Phases)-1].Name)
	assert.InDelta(t, 700, sum(rt), 1e-9)
	tl := LaunchTimeline(Launch{Start: at(0), Prepare: at(0), Spawn: at(0), Ranks: []Rank{r0, r1}, End: at(1010)})
	assert.InDelta(t, 1010, sum(tl), 1e-9)
	for _, p := range tl.Phases {
		assert.GreaterOrEqual(t, p.MS, 0.0, p.Name)
	}
}

// Engine phases that add up to more than the wall time the worker saw are
// scaled down to it.
func TestSplitCreate(t *testing.T) {
	got := splitCreate(100, []store.Phase{{Name: "device_init", MS: 150}, {Name: "model_build", MS: 50}})
	assert.Equal(t, []store.Phase{{Name: "create.device_init", MS: 75}, {Name: "create.model_build", MS: 25}, {Name: "create.other", MS: 0}}, got)
}

func TestSettleStep(t *testing.T) {
	flat := []float64{25, 26, 25, 25.5, 26, 25, 25, 26}
	for _, tc := range []struct {
		desc     string
		warmup   []float64
		measured []float64
		want     int
	}{
		{"settled from the first step", []float64{25.2, 25.1}, flat, 0},
		{"autotuning and allocator growth in the first two", []float64{900, 60, 25.4, 25}, flat, 2},
		{"warm-up too short: still slow in the measured window", []float64{900, 60}, append([]float64{40, 38}, flat...), 4},
		{"one late hiccup does not count", []float64{300}, []float64{25, 25, 90, 25, 25, 26, 25}, 1},
		{"two regimes of a host-bound launch stay in the band", []float64{400}, []float64{25, 30, 25, 30, 30, 25, 25, 30, 25, 30}, 1},
		{"too few measured steps", nil, []float64{25, 25}, -1},
		// the H100's power limiter: fast first measured steps, slow ones from step 43 of 55
		{"a slow-down late in the window is not warm-up", []float64{900, 30, 18, 18, 18}, append(slices.Repeat([]float64{17.8}, 38), slices.Repeat([]float64{19.5}, 12)...), 2},
	} {
		assert.Equal(t, tc.want, SettleStep(tc.warmup, tc.measured), tc.desc)
	}
	assert.True(t, LateSlowdown([]float64{900, 30}, append(slices.Repeat([]float64{17.8}, 38), slices.Repeat([]float64{19.5}, 12)...)))
	assert.False(t, LateSlowdown([]float64{900, 30}, flat))
	assert.False(t, LateSlowdown([]float64{300}, []float64{25, 25, 90, 25, 25, 26, 25}), "one hiccup")
}

func TestETA(t *testing.T) {
	assert.Equal(t, 30*time.Second, ETA(20*time.Second, 2, 5))
	assert.Zero(t, ETA(20*time.Second, 0, 5), "nothing finished: no pace")
	assert.Zero(t, ETA(20*time.Second, 5, 5))
}

// run builds a run of launches with timelines: each trial's launches of
// fixed + steps × step ms.
func run(dir string, trials map[string][2]float64, warmup, steps, repeats int) *store.Run {
	r := &store.Run{Dir: dir, Manifest: store.Manifest{Study: "gpt", Model: map[string]any{"family": "gpt", "preset": "124m"},
		Workload: map[string]any{"device_resolved": "cuda", "warmup_steps": float64(warmup), "repeats": float64(repeats)},
		Host:     store.Host{GPUs: []store.GPU{{Name: "NVIDIA H200"}}}}}
	start := t0
	i := 0
	for id, c := range trials {
		rec := store.TrialRecord{ID: id, Index: i, Outcome: store.OK}
		i++
		for rep := 0; rep < repeats; rep++ {
			fixed, step := c[0], c[1]
			warm, meas := float64(warmup-1)*step, float64(steps)*step
			tl := &store.Timeline{Start: start, Phases: []store.Phase{{Name: PhaseSpawn, MS: fixed}, {Name: PhaseWarmup, MS: warm}, {Name: PhaseMeasured, MS: meas}}}
			tl.End = start.Add(time.Duration((fixed + warm + meas) * float64(time.Millisecond)))
			start = tl.End
			st := make([]engine.StepMetrics, steps)
			rec.Repeats = append(rec.Repeats, store.RepeatRecord{Repeat: rep, Outcome: store.OK, Timeline: tl,
				Ranks: []store.RankRecord{{WarmupSteps: warmup, Steps: st}}})
		}
		r.Trials = append(r.Trials, rec)
	}
	return r
}

// The estimate of a plan: each trial's own fixed cost and step time where it
// ran before, the medians over all launches for a new trial.
func TestEstimatePlan(t *testing.T) {
	h := run("results/gpt/a", map[string][2]float64{"aaaa": {4000, 25}, "bbbb": {6000, 50}}, 10, 50, 3)
	e := EstimatePlan([]*store.Run{h}, Plan{Trials: []string{"aaaa", "bbbb", "cccc"}, Repeats: 2, WarmupSteps: 5, Steps: 20})
	require.NotNil(t, e)
	assert.Equal(t, 6, e.Launches)
	assert.Equal(t, 1, e.Runs)
	assert.Equal(t, 6, e.Samples)
	assert.Equal(t, 2, e.OwnTrials)
	// aaaa: 2 × (4000 + 24 × 25); bbbb: 2 × (6000 + 24 × 50); cccc: medians (5000, 37.5)
	want := 2*(4000+24*25.0) + 2*(6000+24*50.0) + 2*(5000+24*37.5)
	assert.InDelta(t, want, float64(e.Total)/float64(time.Millisecond), 1e-6)
	assert.Contains(t, e.Method, "fixed cost")
	assert.Nil(t, EstimatePlan(nil, Plan{Trials: []string{"a"}}), "no history, no estimate")
	// window floors: aaaa's 4 warm-up steps (100 ms) and 20 steps (500 ms) last at least 2 s and 5 s
	e = EstimatePlan([]*store.Run{h}, Plan{Trials: []string{"aaaa"}, Repeats: 1, WarmupSteps: 5, Steps: 20,
		WarmupSeconds: 2, MeasureSeconds: 5})
	assert.InDelta(t, 4000+2000+5000, float64(e.Total)/float64(time.Millisecond), 1e-6)
}

func TestMatches(t *testing.T) {
	man := run("x", nil, 1, 1, 1).Manifest
	assert.True(t, matches(man, Machine{Study: "gpt", Family: "gpt", Preset: "124m", Device: "cuda", GPU: "NVIDIA H200"}))
	assert.True(t, matches(man, Machine{Study: "gpt", Family: "gpt", Preset: "124m", Device: "auto"}))
	assert.False(t, matches(man, Machine{Study: "gpt", Family: "gpt", Preset: "124m", Device: "cuda", GPU: "NVIDIA A100"}))
	assert.False(t, matches(man, Machine{Study: "gpt", Family: "gpt", Preset: "tiny"}))
	assert.False(t, matches(man, Machine{Study: "gpt", Family: "gpt", Preset: "124m", Device: "cpu"}))
}

func TestSummarize(t *testing.T) {
	r := run("x", map[string][2]float64{"aaaa": {4000, 25}}, 10, 40, 2)
	s := Summarize(r)
	require.NotNil(t, s)
	assert.Equal(t, 2, s.Launches)
	assert.InDelta(t, 2*(4000+9*25+40*25.0), s.WallMS, 1e-6)
	assert.InDelta(t, 2*40*25.0/s.WallMS, s.MeasuredShare, 1e-9)
	assert.Equal(t, []string{PhaseSpawn, PhaseWarmup, PhaseMeasured}, names(&store.Timeline{Phases: s.Phases}))
	assert.Nil(t, Summarize(&store.Run{}), "no timelines (runs recorded before them)")
}

// aaRun is a one-trial run of launches in the --overlap aa pattern whose
// throughput is base × (1 + effect when hosting), with a fixed jitter.
func aaRun(n int, effect float64) *store.Run {
	rec := store.TrialRecord{ID: "t", Outcome: store.OK}
	jitter := []float64{0.004, -0.006, 0.002, -0.001, 0.005, -0.003, 0.001, -0.002}
	for i := 0; i < n; i++ {
		hosted := i%4 < 2
		ahead := i > 0 && (i-1)%4 < 2
		v := 1000 * (1 + jitter[i%len(jitter)])
		if hosted {
			v *= 1 + effect
		}
		rec.Repeats = append(rec.Repeats, store.RepeatRecord{Repeat: i, Outcome: store.OK, SamplesPerS: v,
			Overlap: &store.Overlap{PreparedAhead: ahead, NextPrepared: hosted}})
	}
	return &store.Run{Trials: []store.TrialRecord{rec}}
}

func TestCompareOverlap(t *testing.T) {
	a := CompareOverlap(aaRun(24, 0), 0.05)
	require.NotNil(t, a)
	assert.Equal(t, 0.025, a.Limit)
	assert.Equal(t, AANoDisturbance, a.Verdict, "%v", a.Comparisons)
	assert.Equal(t, 12, a.Comparisons[0].N)

	a = CompareOverlap(aaRun(24, -0.05), 0.05)
	assert.Equal(t, AADisturbs, a.Verdict, "hosting slows the launch by 5%%: %v", a.Comparisons)
	assert.Less(t, a.Comparisons[0].Hi, 1.0)

	assert.Nil(t, CompareOverlap(run("x", map[string][2]float64{"a": {1, 1}}, 1, 3, 3), 0.05), "not an A/A run")

	// the mode recorded decides: an aa-tail run is compared, a tail or on
	// run (every launch but the first prepared ahead) is not an A/A run
	for mode, want := range map[string]bool{"aa": true, "aa-tail": true, "tail": false, "on": false} {
		r := aaRun(24, 0)
		for i := range r.Trials[0].Repeats {
			r.Trials[0].Repeats[i].Overlap.Mode = mode
		}
		assert.Equal(t, want, CompareOverlap(r, 0.05) != nil, "mode %s", mode)
	}
}

// RunProgress counts launches by their rank-0 logs: one finished trial of
// two repeats and a second trial with its first launch in flight.
func TestRunProgress(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"logs/aaaa/rank0.r0.log", "logs/aaaa/rank0.r1.log", "logs/aaaa/rank1.r0.log", "logs/bbbb/rank0.r0.log"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	r := &store.Run{Dir: dir, Manifest: store.Manifest{Created: t0, Workload: map[string]any{"repeats": float64(2)},
		Plan: []store.PlannedTrial{{ID: "aaaa"}, {ID: "bbbb"}, {ID: "cccc"}}},
		Trials: []store.TrialRecord{{ID: "aaaa", Finished: at(20000)}}}
	p := RunProgress(r, at(30000))
	assert.Equal(t, Progress{Planned: 6, Started: 3, Finished: 2, Elapsed: 30 * time.Second, ETA: 60 * time.Second}, p)

	r.Trials = append(r.Trials, store.TrialRecord{ID: "bbbb", Finished: at(40000)}, store.TrialRecord{ID: "cccc", Finished: at(50000)})
	p = RunProgress(r, at(90000))
	assert.True(t, p.Done)
	assert.Equal(t, 50*time.Second, p.Elapsed, "a finished run's elapsed time ends at its last record")
	assert.Zero(t, p.ETA)

	// an interrupted record is not done: --resume runs that trial again
	r.Trials[2].Outcome = store.Interrupted
	p = RunProgress(r, at(90000))
	assert.False(t, p.Done, "an interrupted trial is not done")
	r.Trials[2].Outcome = store.OK

	// repeats: auto (manifest.json's measurement): planned at its maximum,
	// so the ETA is an upper bound, and the time budget caps it
	r.Trials = r.Trials[:1]
	r.Manifest.Workload = map[string]any{"repeats": "auto"}
	r.Manifest.Measurement = &store.Measurement{Auto: true, MinRepeats: 5, MaxRepeats: 4}
	p = RunProgress(r, at(30000))
	assert.Equal(t, Progress{Planned: 12, Started: 3, Finished: 2, Elapsed: 30 * time.Second, ETA: 150 * time.Second, AtMost: true}, p)
	r.Manifest.Measurement.MaxTimeS = 100
	p = RunProgress(r, at(30000))
	assert.Equal(t, 70*time.Second, p.ETA, "the budget's 100 s less the 30 s elapsed")
	assert.True(t, p.AtMost)
}

// Too few launches a side: no interval, and the result still encodes as
// JSON (summary.json).
func TestCompareOverlapFewLaunches(t *testing.T) {
	a := CompareOverlap(aaRun(5, 0), 0.05)
	require.NotNil(t, a)
	assert.Equal(t, 1, a.Comparisons[2].NRef, "neither: only the fourth launch")
	assert.Zero(t, a.Comparisons[2].Lo)
	_, err := json.Marshal(a)
	assert.NoError(t, err)
}
