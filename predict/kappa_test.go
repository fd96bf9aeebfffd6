package predict

import "testing"

// κ as a pace (the default): while a collective runs the backward computes
// at 1/κ of its pace, at full pace between collectives. Closed forms on
// oneBucket (forward 10, backward B = 20, tail 1, optimizer 3): a collective
// of time T that starts at s inside the backward (s + T ≤ the stretched
// end) does T/κ of backward work in T, so the backward ends at
// B + T·(1 − 1/κ); with g = (T/κ)/B the share of the backward's work it
// covers, that is B·g·(κ − 1). One that covers the backward throughout
// (ready at 0, T ≥ κ·B) gives B·κ, the whole-backward κ. Simulate and
// SimulateRanks (N ranks each running the same step) agree.
func TestSimulateKappaPaceClosedForms(t *testing.T) {
	const B, rest = 20.0, 10 + 1 + 3
	tests := []struct {
		description   string
		ready, T      float64
		kappa         float64
		steal         float64 // a --fit-stretch steal beside κ (0: none)
		overlap       bool
		step, stretch float64
	}{
		{"covering the whole backward: backward·κ", 0, 30, 1.5, 0, true, rest + 30, 10},
		{"covering it and beyond: backward·κ, then the collective", 0, 40, 1.5, 0, true, rest + 40, 10},
		// From 5 for 4 ms: 4/1.5 of work in 4 ms: ends at 20 + 4·(1 − 1/1.5).
		{"covering a part: T·(1 − 1/κ)", 5, 4, 1.5, 0, true, rest + B + 4.0/3, 4.0 / 3},
		{"covering a part, κ 2: half of T", 5, 6, 2, 0, true, rest + B + 3, 3},
		// Ready as the backward ends: nothing overlapped, the collective exposed.
		{"after the backward: nothing", 20, 4, 1.5, 0, true, rest + B + 4, 0},
		// From 18: 2 ms of work left at pace 1/2 take 4; the collective ends at 22 too.
		{"past the backward's end: only the part inside", 18, 4, 2, 0, true, rest + 22, 2},
		{"κ 1: unchanged", 5, 4, 1, 0, true, rest + B, 0},
		{"overlap off: unchanged", 5, 4, 1.5, 0, false, rest + B + 4, 0},
		// A steal of 1 in 4 ms leaves pace 3/4, κ 1.5 takes it to 1/2: 2 ms of work in 4.
		{"with a steal: the paces multiply", 5, 4, 1.5, 1, true, rest + B + 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			o := Options{Ranks: 2, Overlap: tt.overlap, Kappa: tt.kappa, Cost: fixed{latMS: tt.T}}
			if tt.steal > 0 {
				o.Stretch = &Stretch{PerCallMS: tt.steal}
			}
			p := oneBucket(tt.ready)
			if !tt.overlap {
				p.Buckets[0].ReadyMS = -1
			}
			r, err := Simulate(p, o)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "step", r.StepMS, tt.step)
			near(t, "stretch", r.StretchMS, tt.stretch)
			q, err := SimulateRanks([]Profile{p, p}, o)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "ranks' step", q.StepMS, tt.step)
		})
	}
}

// Two collectives inside the backward add their stretches, and the second's
// ready time moves with the first's: ready at 5 and 10 (work), 4 ms each,
// κ 2: the first runs 5–9 (2 of work), the second is ready at work 10 =
// 9 + 3 = 12 and runs 12–16 (2 of work), the backward ends at 20 + 2 + 2.
func TestSimulateKappaPaceTwoCollectives(t *testing.T) {
	p := Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1, ReadyMS: 5}, {Op: AllReduce, Bytes: 1, ReadyMS: 10}}}
	o := Options{Ranks: 2, Overlap: true, Kappa: 2, Cost: fixed{latMS: 4}}
	r, err := Simulate(p, o)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "second start", r.Buckets[1].StartMS, 12)
	// Ready times in wall time, as the unstretched schedule's are: the second
	// bucket at 12, not its work time 10 (it would read as queued 2 ms).
	near(t, "first ready", r.Buckets[0].ReadyMS, 5)
	near(t, "second ready", r.Buckets[1].ReadyMS, 12)
	near(t, "step", r.StepMS, 10+24+1+3)
	q, err := SimulateRanks([]Profile{p, p, p}, o)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ranks' step", q.StepMS, 10+24+1+3)
	// The whole-backward κ (a stretch calibration's) multiplies it instead:
	// ready at 10 and 20, backward 40, collectives 10–14 and 20–24.
	o.KappaWhole = true
	if r, err = Simulate(p, o); err != nil {
		t.Fatal(err)
	}
	near(t, "whole-backward κ step", r.StepMS, 10+40+1+3)
	if q, err = SimulateRanks([]Profile{p, p}, o); err != nil {
		t.Fatal(err)
	}
	near(t, "whole-backward κ ranks' step", q.StepMS, 10+40+1+3)
}
