package predict

import (
	"math"
	"testing"

	"github.com/casestudy/casestudy/engine"
)

// oneBucket is a step of forward 10, backward 20, tail 1, optimizer 3 and
// one bucket ready at ready into the backward.
func oneBucket(ready float64) Profile {
	return Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: ready}}}
}

// The stretch by closed forms: a collective of time T that overlaps the
// backward throughout costs it its steal s (the compute runs at 1 − s/T
// while it runs), one that overlaps part of it that part's share, one after
// it nothing; the step and Simulate's StretchMS say so.
func TestSimulateStretchClosedForms(t *testing.T) {
	tests := []struct {
		description    string
		ready, steal   float64
		beside         float64 // the collective's time beside compute (0: none)
		step, stretch  float64
		startMS, endMS float64
	}{
		// f = 1/4 for 4 ms: 3 ms of backward done in it, 12 left: ends at 21.
		{"one collective inside the backward costs its steal", 5, 1, 0, 10 + 21 + 1 + 3, 1, 5, 9},
		// At the pace beside compute (8 ms, f = 2/8): still its steal.
		{"at its pace beside compute: still its steal", 5, 2, 8, 10 + 22 + 1 + 3, 2, 5, 13},
		// Ready as the backward ends: nothing overlapped, the collective exposed.
		{"no overlap, no stretch", 20, 1, 0, 10 + 20 + 4 + 1 + 3, 0, 20, 24},
		// From 18: f = 1/2, the 2 ms left take 4: the backward and the collective end at 22.
		{"partly overlapped: that part's share", 18, 2, 0, 10 + 22 + 1 + 3, 2, 18, 22},
		// A steal above the collective's time stops the compute while it runs: at most T.
		{"a steal past the collective's time stops the compute for it", 5, 10, 0, 10 + 24 + 1 + 3, 4, 5, 9},
		{"no steal", 5, 0, 0, 10 + 20 + 1 + 3, 0, 5, 9},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			o := Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 4}, Stretch: &Stretch{PerCallMS: tt.steal}}
			if tt.beside > 0 {
				o.Beside = fixed{latMS: tt.beside}
			}
			r, err := Simulate(oneBucket(tt.ready), o)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "step", r.StepMS, tt.step)
			near(t, "stretch", r.StretchMS, tt.stretch)
			near(t, "start", r.Buckets[0].StartMS, tt.startMS)
			near(t, "end", r.Buckets[0].EndMS, tt.endMS)
			// N ranks each running this step: the same step.
			q, err := SimulateRanks([]Profile{oneBucket(tt.ready), oneBucket(tt.ready)}, o)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "ranks' step", q.StepMS, tt.step)
		})
	}
}

// Collectives back to back inside the backward stretch it by the sum of
// their steals (per call + per byte); with overlap off none overlaps it.
func TestSimulateStretchAddsUp(t *testing.T) {
	p := profile3() // buckets of 1000, 2000, 4000 bytes ready at 5, 12, 20 of a backward of 20
	p.BackwardMS = 40
	for i := range p.Buckets {
		p.Buckets[i].ReadyMS = float64(5 * (i + 1)) // 5, 10, 15: all three inside the backward
	}
	st := &Stretch{PerCallMS: 0.5, PerByteMS: 1e-4} // 0.6, 0.7, 0.9 ms
	c := fixed{latMS: 1, msPerByte: 1e-3}           // 2, 3, 5 ms
	r, err := Simulate(p, Options{Ranks: 2, Overlap: true, Cost: c, Stretch: st})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "stretch", r.StretchMS, 0.6+0.7+0.9)
	near(t, "step", r.StepMS, 10+40+0.6+0.7+0.9+1+3)
	off := Options{Ranks: 2, Overlap: false, Cost: c}
	want, err := Simulate(p, off)
	if err != nil {
		t.Fatal(err)
	}
	off.Stretch = st
	got, err := Simulate(p, off)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "overlap off", got.StepMS, want.StepMS)
}

// A zero stretch is the schedule without one, for one profile and for the
// rank draws (steps that differ, so the draws wait for the slowest).
func TestSimulateZeroStretchIsNone(t *testing.T) {
	steps := []Profile{profile3(), profile3(), profile3()}
	steps[1].BackwardMS, steps[2].ForwardMS = 30, 14
	for i := range steps[1].Buckets {
		steps[1].Buckets[i].ReadyMS *= 1.5
	}
	c := fixed{latMS: 1, msPerByte: 1e-3}
	for _, beside := range []CostModel{nil, fixed{latMS: 3, msPerByte: 2e-3}} {
		o := Options{Ranks: 3, Overlap: true, Cost: c, Beside: beside}
		want, err := SimulateRanks(steps, o)
		if err != nil {
			t.Fatal(err)
		}
		w1, err := Simulate(profile3(), o)
		if err != nil {
			t.Fatal(err)
		}
		o.Stretch = &Stretch{}
		got, err := SimulateRanks(steps, o)
		if err != nil {
			t.Fatal(err)
		}
		g1, err := Simulate(profile3(), o)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "ranks' step", got.StepMS, want.StepMS)
		near(t, "step", g1.StepMS, w1.StepMS)
		near(t, "exposed", g1.ExposedCommMS, w1.ExposedCommMS)
	}
}

// Two ranks: the rank whose backward a collective overlaps is stretched, the
// one that already ended is not; the step waits for the stretched one.
func TestSimulateRanksStretchPerRank(t *testing.T) {
	fast, slow := oneBucket(5), oneBucket(5)
	fast.BackwardMS, fast.Buckets[0].ReadyMS = 6, 5 // ends at 14+6 = 20
	slow.BackwardMS = 40                            // bucket ready at 14+5, ends at 54 alone
	o := Options{Ranks: 2, Overlap: true, Cost: fixed{latMS: 4}, Stretch: &Stretch{PerCallMS: 2}}
	// Draws (fast, fast): 14+5, f = 1/2 over 19..23: 1 ms left at 21 -> 20 + 1 = 22? The
	// fast rank's remaining 1 ms at half pace takes 2: ends at 21; the collective at 23.
	// (slow, slow): ends at 14 + 40 + 2 = 56. Mixed: the collective starts at 19 (both
	// ready), stretches the slow rank by 2 and the fast one by 1: step 56.
	got, err := SimulateRanks([]Profile{fast, slow}, o)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "step", got.StepMS, (23+56+56+56)/4.0)
}

func TestFitStretchRecoversItsParameters(t *testing.T) {
	var pts []StretchPoint
	for _, n := range []int64{1 << 14, 1 << 18, 1 << 20, 1 << 24} {
		pts = append(pts, StretchPoint{Bytes: n, StealMS: 0.3 + 2e-6*float64(n), CommMS: 1 + 1e-5*float64(n)})
	}
	s, err := FitStretch(pts, 2, "exact")
	if err != nil {
		t.Fatal(err)
	}
	near(t, "per call", s.PerCallMS, 0.3)
	if math.Abs(s.PerByteMS-2e-6) > 1e-15 {
		t.Errorf("per byte %g, want 2e-6", s.PerByteMS)
	}
	if _, err := FitStretch(pts[:1], 2, "one size"); err == nil {
		t.Error("one size: want an error")
	}
	if _, err := FitStretch([]StretchPoint{{Bytes: 4, CommMS: 0}, {Bytes: 8, CommMS: 1}}, 2, "zero time"); err == nil {
		t.Error("a collective of 0 ms: want an error")
	}
	neg := Stretch{PerCallMS: -1, PerByteMS: 1e-6}
	near(t, "a negative fit clamps at 0", neg.StealMS(1000), 0)
}

// A prediction with a stretch records it and the median profile's stretch
// (its inputs); one without records none.
func TestPredictTrialRecordsTheStretch(t *testing.T) {
	ready := 5.0
	one := engine.StepMetrics{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3,
		Buckets: []engine.BucketMetrics{{Op: AllReduce, Bytes: 1000, ReadyMS: &ready}}}
	in := TrialInput{ID: "t", Knobs: map[string]string{}, Launches: [][]engine.StepMetrics{{one, one}}}
	s := Setup{Ranks: 2, Cost: fixed{latMS: 4}, Stretch: &Stretch{PerCallMS: 1, Source: "test"}}
	p, err := PredictTrial(in, s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Stretch == nil || p.Stretch.PerCallMS != 1 {
		t.Fatalf("stretch not recorded: %+v", p.Stretch)
	}
	near(t, "stretch", p.StretchMS, 1)
	near(t, "step", p.StepMS, 10+21+1+3)
	s.Stretch = nil
	if p, err = PredictTrial(in, s); err != nil || p.Stretch != nil || p.StretchMS != 0 {
		t.Errorf("without a stretch: %+v, %v", p.Stretch, err)
	}
}
