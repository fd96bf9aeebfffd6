package predict

import (
	"math"
	"strings"
	"testing"
)

// fixed is a cost model with a closed form: lat + bytes/bw per collective.
type fixed struct{ latMS, msPerByte float64 }

func (f fixed) Name() string { return "fixed" }
func (f fixed) Time(op string, bytes int64, ranks int) (float64, string, error) {
	if ranks <= 1 {
		return 0, "one rank", nil
	}
	return f.latMS + float64(bytes)*f.msPerByte, "fixed", nil
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}

func profile3() Profile {
	return Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: 5}, {Op: AllReduce, Bytes: 2000, ReadyMS: 12}, {Op: AllReduce, Bytes: 4000, ReadyMS: 20}}}
}

// One bucket, ready at the end of backward: the whole collective is exposed.
func TestSimulateOneBucketClosedForm(t *testing.T) {
	p := Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1 << 20, ReadyMS: 20}}}
	c := fixed{latMS: 0.5, msPerByte: 1e-5}
	r, err := Simulate(p, Options{Ranks: 8, Overlap: true, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	T := 0.5 + float64(1<<20)*1e-5
	near(t, "comm", r.CommMS, T)
	near(t, "exposed", r.ExposedCommMS, T)
	near(t, "step", r.StepMS, 10+20+T+1+3)
}

// Infinite bandwidth and no latency: the step is the one-rank step.
func TestSimulateInfiniteBandwidth(t *testing.T) {
	r, err := Simulate(profile3(), Options{Ranks: 64, Overlap: true, Cost: fixed{}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "step", r.StepMS, 10+20+1+3)
	near(t, "exposed", r.ExposedCommMS, 0)
}

// Overlap off: forward + backward + every collective + tail + optimizer.
func TestSimulateOverlapOffIsTheSum(t *testing.T) {
	c := fixed{latMS: 1, msPerByte: 1e-3}
	r, err := Simulate(profile3(), Options{Ranks: 4, Overlap: false, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	sum := 3 + 7e3*1e-3 // three latencies and 7000 bytes
	near(t, "comm", r.CommMS, sum)
	near(t, "exposed", r.ExposedCommMS, sum)
	near(t, "step", r.StepMS, 10+20+sum+1+3)
}

// Overlap on: the schedule by hand. Buckets of 2, 3 and 5 ms ready at 5, 12
// and 20 ms: they run 5-7, 12-15, 20-25: 5 ms exposed.
func TestSimulateOverlapSchedule(t *testing.T) {
	c := fixed{latMS: 1, msPerByte: 1e-3}
	r, err := Simulate(profile3(), Options{Ranks: 2, Overlap: true, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]float64{{5, 7}, {12, 15}, {20, 25}}
	for i, b := range r.Buckets {
		near(t, "start", b.StartMS, want[i][0])
		near(t, "end", b.EndMS, want[i][1])
	}
	near(t, "exposed", r.ExposedCommMS, 5)
	near(t, "step", r.StepMS, 10+25+1+3)
	// A slow network (5, 10, 20 ms) queues the last bucket behind the second:
	// 5-10, 12-22, 22-42.
	r, err = Simulate(profile3(), Options{Ranks: 2, Overlap: true, Cost: fixed{msPerByte: 5e-3}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "queued start", r.Buckets[2].StartMS, 22)
	near(t, "queued end", r.Buckets[2].EndMS, 42)
	near(t, "queued step", r.StepMS, 10+42+1+3)
}

// κ as the whole backward's ratio (KappaWhole) stretches backward and the
// ready times; as a pace it costs nothing when the collectives take no time
// (kappa_test.go has its closed forms); ComputeScale every compute time.
func TestSimulateKappaAndComputeScale(t *testing.T) {
	r, err := Simulate(profile3(), Options{Ranks: 2, Overlap: true, Kappa: 1.5, KappaWhole: true, Cost: fixed{}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "kappa step", r.StepMS, 10+30+1+3)
	near(t, "ready", r.Buckets[1].ReadyMS, 18)
	r, err = Simulate(profile3(), Options{Ranks: 2, Overlap: true, Kappa: 1.5, Cost: fixed{}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "pace kappa, instant collectives", r.StepMS, 10+20+1+3)
	near(t, "pace kappa ready", r.Buckets[1].ReadyMS, 12)
	r, err = Simulate(profile3(), Options{Ranks: 2, Overlap: true, ComputeScale: 2, Cost: fixed{}})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "scaled step", r.StepMS, 2*(10+20+1+3))
	if _, err := Simulate(profile3(), Options{Ranks: 2, Kappa: 0.5, Cost: fixed{}}); err == nil {
		t.Error("kappa below 1 accepted")
	}
}

// The measured run's own wait for its collectives leaves the tail.
func TestTailLessTheMeasuredWait(t *testing.T) {
	p := profile3()
	p.Buckets[2].MS = 0.75 // the last bucket's world-1 collective ran 20-20.75
	p.TailMS = 1.75
	got, err := p.tailCompute()
	if err != nil {
		t.Fatal(err)
	}
	near(t, "tail", got, 1)
	// Measured with overlap off: every collective ran after backward.
	q := profile3()
	for i := range q.Buckets {
		q.Buckets[i].ReadyMS, q.Buckets[i].MS = -1, 0.5
	}
	q.TailMS = 2.5
	got, err = q.tailCompute()
	if err != nil {
		t.Fatal(err)
	}
	near(t, "tail, overlap off", got, 1)
	if _, err := Simulate(q, Options{Ranks: 2, Overlap: true, Cost: fixed{}}); err == nil || !strings.Contains(err.Error(), "ready time") {
		t.Errorf("overlap prediction from an overlap-off run: %v", err)
	}
}

// Top-k: the all-gather's output grows with the ranks.
func TestTopKAllGatherBytes(t *testing.T) {
	p := Profile{BackwardMS: 10, World: 1, Buckets: []Bucket{{Op: AllGather, Bytes: 800, ReadyMS: 10}}}
	r, err := Simulate(p, Options{Ranks: 8, Overlap: true, Cost: fixed{msPerByte: 1e-3}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Buckets[0].Bytes != 6400 {
		t.Errorf("all-gather bytes at 8 ranks = %d, want 6400", r.Buckets[0].Bytes)
	}
	near(t, "step", r.StepMS, 10+6.4)
}

func TestPipelineBubble(t *testing.T) {
	step, bubble, err := Pipeline{Stages: 4, MicroBatches: 8, ForwardMS: 1, BackwardMS: 2}.Step()
	if err != nil {
		t.Fatal(err)
	}
	near(t, "step", step, 33)
	near(t, "bubble", bubble, 9)
	near(t, "bubble fraction", bubble/step, 3.0/11.0) // (S-1)/(M+S-1)
}

// TestCalibrateShadow: the stretch calibration's κ is the median, over every
// loaded step, of its backward over the mean of the clean steps beside it.
func TestCalibrateShadow(t *testing.T) {
	c0, l := func(ms float64) ShadowStep { return ShadowStep{BackwardMS: ms} }, func(ms float64) ShadowStep {
		return ShadowStep{BackwardMS: ms, Loaded: true, GBps: 2}
	}
	// A load that doubles the host's pace halfway through a launch cancels:
	// 12/10, 12/10 ((10+10)/2), 24/((10+20)/2)=1.6 at the change, 24/20, 24/20.
	launches := [][]ShadowStep{{c0(10), l(12), c0(10), l(12), c0(10), l(24), c0(20), l(24), c0(20), l(24)}}
	c, err := CalibrateShadow("t", 4, launches)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ratio", c.Ratio, 1.2)
	near(t, "kappa", c.Kappa, 1.2)
	if c.ShadowRanks != 4 || c.Launches != 1 || c.Steps != 5 || c.LoadGBps != 2 || c.BackwardMS != 10 || c.LoadedBackwardMS != 24 {
		t.Errorf("calibration %+v: want 4 ranks, 1 launch, 5 loaded steps, 2 GB/s, medians 10 and 24 ms", c)
	}
	// Two launches pool their steps: ratios 1.1, 1.1 and 1.3: median 1.1.
	c, err = CalibrateShadow("t", 2, [][]ShadowStep{{c0(10), l(11), c0(10), l(11)}, {l(13), c0(10)}})
	if err != nil || c.Launches != 2 || c.Steps != 3 {
		t.Fatalf("two launches: %+v, %v", c, err)
	}
	near(t, "pooled ratio", c.Ratio, 1.1)
	c, err = CalibrateShadow("t", 2, [][]ShadowStep{{c0(10), l(9)}})
	if err != nil || c.Kappa != 1 || c.Ratio != 0.9 {
		t.Errorf("a loaded backward faster than the clean (noise): κ %g ratio %g (%v), want 1 and 0.9 kept", c.Kappa, c.Ratio, err)
	}
	for name, in := range map[string][][]ShadowStep{
		"no launches":             nil,
		"no loaded step":          {{c0(10), c0(10)}},
		"no clean neighbour":      {{l(10), l(10)}},
		"a zero backward":         {{c0(0), l(10)}},
		"no traffic on the group": {{c0(10), {BackwardMS: 11, Loaded: true}}},
	} {
		if _, err := CalibrateShadow("t", 2, in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCalibratedCost: a trial's bucket sizes at the time its stretch
// calibration measured (the median over the loaded steps); any other size,
// op or rank count from the fallback model.
func TestCalibratedCost(t *testing.T) {
	steps := [][]Bucket{
		{{Op: AllReduce, Bytes: 100, MS: 2}, {Op: AllReduce, Bytes: 200, MS: 5}},
		{{Op: AllReduce, Bytes: 100, MS: 4}, {Op: AllReduce, Bytes: 200, MS: 6}},
		{{Op: AllReduce, Bytes: 100, MS: 9}, {Op: AllReduce, Bytes: 200, MS: 7}},
	}
	bs := calibratedBuckets(steps)
	if len(bs) != 2 || bs[0].Bytes != 100 || bs[0].MS != 4 || bs[0].Steps != 3 || bs[1].MS != 6 {
		t.Fatalf("medians per size: %+v, want 100 B 4 ms and 200 B 6 ms over 3 steps", bs)
	}
	c := Calibrated{Ranks: 2, Buckets: bs, Fallback: fixed{latMS: 1, msPerByte: 0.01}}
	ms, how, err := c.Time(AllReduce, 200, 2)
	if err != nil || ms != 6 || how != "calibrated" {
		t.Errorf("a calibrated size: %g ms (%s, %v), want 6", ms, how, err)
	}
	want, _, _ := fixed{latMS: 1, msPerByte: 0.01}.Time(AllReduce, 300, 2)
	if ms, _, err := c.Time(AllReduce, 300, 2); err != nil || ms != want {
		t.Errorf("another size: %g ms, want the fallback's %g (%v)", ms, want, err)
	}
	want, _, _ = fixed{latMS: 1, msPerByte: 0.01}.Time(AllReduce, 200, 4)
	if ms, _, _ := c.Time(AllReduce, 200, 4); ms != want {
		t.Errorf("another rank count: %g ms, want the fallback's %g", ms, want)
	}
	if _, _, err := (Calibrated{Ranks: 2, Buckets: bs}).Time(AllGather, 100, 2); err == nil {
		t.Error("no fallback for an uncalibrated op: no error")
	}
	// The schedule with the calibrated times: overlap off adds the sum.
	p := Profile{ForwardMS: 10, BackwardMS: 20, World: 1, Buckets: []Bucket{{Op: AllReduce, Bytes: 100, ReadyMS: 5}, {Op: AllReduce, Bytes: 200, ReadyMS: 20}}}
	r, err := Simulate(p, Options{Ranks: 2, Overlap: false, Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "overlap off with calibrated buckets", r.StepMS, 10+20+4+6)
}
