package predict

import (
	"fmt"
	"testing"

	"github.com/casestudy/casestudy/engine"
)

// Four ranks drawing from three identical steps are Simulate's step of the
// one profile: no draw has a slower rank to wait for.
func TestSimulateRanksOneRankIsSimulate(t *testing.T) {
	c := fixed{latMS: 1, msPerByte: 1e-3}
	for _, overlap := range []bool{true, false} {
		o := Options{Ranks: 4, Overlap: overlap, Cost: c}
		want, err := Simulate(profile3(), o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := SimulateRanks([]Profile{profile3(), profile3(), profile3()}, o)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "step", got.StepMS, want.StepMS)
		if got.Draws != 81 || got.Steps != 3 {
			t.Errorf("draws %d steps %d, want every 3^4 combination of 3 steps", got.Draws, got.Steps)
		}
	}
}

// Two ranks, two measured steps (backward 20 or 40, one bucket ready at the
// end of backward, 5 ms): every pair equally likely, the step waits for the
// slower rank: (fwd+tail+opt 14) + max(backward) + 5, averaged over
// (20,20), (20,40), (40,20), (40,40); the median profile says 14+30+5.
func TestSimulateRanksWaitsForTheSlowest(t *testing.T) {
	step := func(bwd float64) Profile {
		return Profile{ForwardMS: 10, BackwardMS: bwd, TailMS: 1, OptimizerMS: 3, World: 1,
			Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: bwd}}}
	}
	c := fixed{latMS: 5}
	got, err := SimulateRanks([]Profile{step(20), step(40)}, Options{Ranks: 2, Overlap: true, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "step", got.StepMS, 14+(20+40+40+40)/4.0+5)
	one, err := SimulateRanks([]Profile{step(20), step(40)}, Options{Ranks: 1, Overlap: true, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "one rank: the mean step", one.StepMS, 14+30)
}

// Past maxTuples combinations the draws are a fixed-seed sample: the same
// inputs give the same prediction, between the mean step and the slowest.
func TestSimulateRanksSampledIsDeterministic(t *testing.T) {
	var steps []Profile
	for i := range 40 {
		steps = append(steps, Profile{ForwardMS: 10, BackwardMS: float64(20 + i), World: 1,
			Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: float64(20 + i)}}})
	}
	o := Options{Ranks: 8, Overlap: true, Cost: fixed{latMS: 1}}
	a, err := SimulateRanks(steps, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SimulateRanks(steps, o)
	if a.Draws != maxTuples || a.StepMS != b.StepMS {
		t.Fatalf("draws %d (want %d), steps %g and %g (want equal)", a.Draws, maxTuples, a.StepMS, b.StepMS)
	}
	if a.StepMS <= 10+39.5/2+20+1 || a.StepMS > 10+59+1 {
		t.Errorf("step %g: want above the mean step and at most the slowest", a.StepMS)
	}
}

// A collective runs at its pace beside compute until compute ends, then at
// its pace alone.
func TestCommEnd(t *testing.T) {
	near(t, "after compute", commEnd(12, 10, 5, 20), 17)
	near(t, "within compute", commEnd(0, 30, 5, 20), 20)
	near(t, "across its end: half done beside, the other half alone", commEnd(0, 10, 5, 20), 12.5)
	near(t, "no beside model", commEnd(0, 10, 5, 0), 5)
}

// Simulate with a beside model: one bucket ready at 5 ms of a 20 ms
// backward, 4 ms alone and 30 ms beside compute: half of it by the end of
// backward (15 of 30 ms), the rest at 2 ms: ends at 22, 2 ms exposed.
func TestSimulateBesideCompute(t *testing.T) {
	p := Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: 5}}}
	r, err := Simulate(p, Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 4}, Beside: fixed{latMS: 30}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "exposed", r.ExposedCommMS, 2)
	near(t, "comm", r.CommMS, 17)
	near(t, "step", r.StepMS, 10+20+2+1+3)
	q, err := SimulateRanks([]Profile{p}, Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 4}, Beside: fixed{latMS: 30}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ranks", q.StepMS, r.StepMS)
}

// A trial's predicted step is the median over its launches of the N-rank
// step whose ranks all draw from the launch's steps; with LaunchPerRank, the
// median over every set of N distinct launches of the N-rank step whose rank
// r draws from launch r's steps alone (with fewer launches than ranks, as by
// default). The median profile's step is kept
// beside it. Launches A (20, 20), B (20, 40), C (40, 40) of backward times,
// forward 10, one bucket of 5 ms ready at the backward's end.
func TestPredictTrialRanksFromLaunches(t *testing.T) {
	for _, tt := range []struct {
		ranks, draws    int
		perRank         bool
		step, low, high float64
	}{
		// {A, B}: rank 0 always 20, rank 1 20 or 40: (10+20+5 + 10+40+5)/2 = 45;
		// {A, C} and {B, C}: rank 1 always 40: 55. Median 55.
		{ranks: 2, draws: 3 * 4, perRank: true, step: 55, low: 45, high: 55},
		// 4 ranks, 3 launches: A 35; B: all 4 ranks at 20 in 1 of 16 draws,
		// (35 + 15·55)/16 = 53.75; C 55. Median 53.75.
		{ranks: 4, draws: 3 * 16, perRank: true, step: 53.75, low: 35, high: 55},
		// 2 ranks by default, every rank from one launch: A 35; B
		// (35+55+55+55)/4 = 50; C 55. Median 50.
		{ranks: 2, draws: 3 * 4, step: 50, low: 35, high: 55},
	} {
		in := TrialInput{ID: "t", Knobs: map[string]string{"ddp.overlap": "true"},
			Launches: [][]engine.StepMetrics{bwdSteps(20, 20), bwdSteps(20, 40), bwdSteps(40, 40)}}
		p, err := PredictTrial(in, Setup{Ranks: tt.ranks, Cost: fixed{latMS: 5}, LaunchPerRank: tt.perRank})
		if err != nil {
			t.Fatal(err)
		}
		near(t, "step", p.StepMS, tt.step)
		near(t, "low", p.LowMS, tt.low)
		near(t, "high", p.HighMS, tt.high)
		near(t, "median profile", p.MedianProfileStepMS, 10+30+5) // the median backward of 20,20,20,40,40,40
		if p.RankDraws != tt.draws {
			t.Errorf("%d ranks: rank draws %d, want %d", tt.ranks, p.RankDraws, tt.draws)
		}
	}
}

// bwdSteps are a launch's measured steps, one per backward time: forward
// 10, one bucket ready at the backward's end.
func bwdSteps(bwd ...float64) []engine.StepMetrics {
	var out []engine.StepMetrics
	for i, b := range bwd {
		r := b
		out = append(out, engine.StepMetrics{Step: i, StepMS: 10 + b, ForwardMS: 10, BackwardMS: b,
			Buckets: []engine.BucketMetrics{{Op: AllReduce, Bytes: 1000, ReadyMS: &r}}})
	}
	return out
}

// Two ranks from two sets: rank 0 always 20, rank 1 always 40: every draw
// waits for rank 1 (10+40+5), where drawing both ranks from the pooled steps
// would average in the pairs of 20s.
func TestSimulateRankSetsEachRankItsOwn(t *testing.T) {
	one := func(bwd float64) Profile {
		return Profile{ForwardMS: 10, BackwardMS: bwd, World: 1, Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: bwd}}}
	}
	a, b := []Profile{one(20), one(20)}, []Profile{one(40), one(40), one(40)}
	q, err := SimulateRankSets([][]Profile{a, b}, Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 5}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "step", q.StepMS, 55)
	if q.Draws != 6 || q.Steps != 5 {
		t.Errorf("draws %d steps %d, want 2 x 3 and 5", q.Draws, q.Steps)
	}
	if _, err := SimulateRankSets([][]Profile{a}, Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 5}}); err == nil {
		t.Error("one set for two ranks: no error")
	}
}

// rankLaunches: every combination of distinct launches in order, each
// launch alone when there are fewer than the ranks, a fixed sample of
// distinct sorted launches past maxLaunchSets.
func TestRankLaunches(t *testing.T) {
	got := rankLaunches(4, 2, true)
	want := [][]int{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("4 launches, 2 ranks: %v, want %v", got, want)
	}
	if got := rankLaunches(3, 4, true); fmt.Sprint(got) != "[[0 0 0 0] [1 1 1 1] [2 2 2 2]]" {
		t.Errorf("3 launches, 4 ranks: %v", got)
	}
	if got := rankLaunches(3, 2, false); fmt.Sprint(got) != "[[0 0] [1 1] [2 2]]" {
		t.Errorf("3 launches, 2 ranks, by default: %v", got)
	}
	if got := rankLaunches(2, 1, true); fmt.Sprint(got) != "[[0] [1]]" {
		t.Errorf("2 launches, 1 rank: %v", got)
	}
	big := rankLaunches(40, 4, true) // C(40, 4) = 91390 sets
	if len(big) != maxLaunchSets || fmt.Sprint(big) != fmt.Sprint(rankLaunches(40, 4, true)) {
		t.Fatalf("40 launches, 4 ranks: %d sets, or not the same twice", len(big))
	}
	for _, set := range big {
		for i := 1; i < len(set); i++ {
			if set[i] <= set[i-1] {
				t.Errorf("set %v: not distinct and sorted", set)
			}
		}
	}
	if n := len(rankLaunches(10, 4, true)); n != 64 { // C(10, 4) = 210: sampled
		t.Errorf("10 launches, 4 ranks: %d sets, want %d", n, maxLaunchSets)
	}
	if n := len(rankLaunches(8, 4, true)); n != 64 { // C(8, 4) = 70: sampled
		t.Errorf("8 launches, 4 ranks: %d sets, want %d", n, maxLaunchSets)
	}
	if n := len(rankLaunches(8, 2, true)); n != 28 {
		t.Errorf("8 launches, 2 ranks: %d sets, want C(8, 2) = 28", n)
	}
}
