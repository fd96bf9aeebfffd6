package predict

import (
	"math"
	"testing"
)

// drawsSE is the standard error of the mean of maxTuples draws from ts
// (each equally likely): the tolerance of a test against the closed form.
func drawsSE(ts []float64) float64 {
	m := mean(ts)
	v := 0.0
	for _, t := range ts {
		v += (t - m) * (t - m)
	}
	return math.Sqrt(v/float64(len(ts))) / math.Sqrt(maxTuples)
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g within %.3g", what, got, want, tol)
	}
}

// drawnBucket simulates 2 ranks, each the same step (forward + tail +
// optimizer 14 ms, backward 20), with one bucket of 1000 bytes ready at
// ready whose calibrated times are ts: the step with the collective at its
// median, and with its time drawn.
func drawnBucket(t *testing.T, ts []float64, ready float64, o Options) (median, drawn RanksResult) {
	t.Helper()
	p := Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: ready}}}
	o.Ranks = 2
	o.Cost = Calibrated{Ranks: 2, Buckets: []CalibratedBucket{{Op: AllReduce, Bytes: 1000, MS: Median(ts), Times: ts}}}
	var err error
	if median, err = SimulateRanks([]Profile{p}, o); err != nil {
		t.Fatal(err)
	}
	o.CollectiveDraws = true
	if drawn, err = SimulateRanks([]Profile{p}, o); err != nil {
		t.Fatal(err)
	}
	return median, drawn
}

// A bucket whose calibrated times are {1, 1, 1, 9} ms (median 1, mean 3),
// overlap off, every rank the same step (forward + tail + optimizer 14,
// backward 20): the step is 34 + the collective, whose expectation is the
// mean, 3; at the median, 1.
func TestCollectiveDrawsOverlapOffIsTheMean(t *testing.T) {
	ts := []float64{1, 1, 1, 9}
	med, got := drawnBucket(t, ts, -1, Options{Overlap: false})
	near(t, "at the median", med.StepMS, 34+1)
	within(t, "drawn", got.StepMS, 34+3, 4*drawsSE(ts))
	if got.Draws < maxTuples {
		t.Errorf("%d draws, want the one combination repeated to at least %d", got.Draws, maxTuples)
	}
}

// Overlap on, one bucket ready 10 ms into a 20 ms backward, its times
// {2, 30} (equally likely): the step is 14 + max(20, 10 + T), 20 or 40, so
// 30 on average (44 in all); the collective at its median (16) or its mean
// (16) gives 14 + 26 = 40: the mean of the max is not the max at the mean.
func TestCollectiveDrawsOverlapTakesTheMeanOfTheMax(t *testing.T) {
	med, got := drawnBucket(t, []float64{2, 30}, 10, Options{Overlap: true})
	near(t, "at the median", med.StepMS, 40)
	within(t, "drawn", got.StepMS, 44, 4*drawsSE([]float64{20, 40}))
}

// Alone and beside compute draw the same quantile: a collective that starts
// 5 ms before the backward ends (ready at 15 of 20), beside times {4, 20}
// and alone times {2, 10}: at the low quantile it ends beside compute at
// 19; at the high one it runs 5 ms beside (a quarter of it) and the rest
// alone, 20 + 0.75·10 = 27.5; the step 14 + max(20, end): 34 or 41.5,
// 37.75 on average. (Independent quantiles would mix 4 with 10, 20 with 2.)
func TestCollectiveDrawsBesideAndAloneAtOneQuantile(t *testing.T) {
	alone := Calibrated{Ranks: 2, Buckets: []CalibratedBucket{{Op: AllReduce, Bytes: 1000, MS: 6, Times: []float64{2, 10}}}}
	beside := Calibrated{Ranks: 2, Buckets: []CalibratedBucket{{Op: AllReduce, Bytes: 1000, MS: 12, Times: []float64{4, 20}}}}
	p := Profile{ForwardMS: 10, BackwardMS: 20, TailMS: 1, OptimizerMS: 3, World: 1,
		Buckets: []Bucket{{Op: AllReduce, Bytes: 1000, ReadyMS: 15}}}
	got, err := SimulateRanks([]Profile{p}, Options{Ranks: 2, Overlap: true, Cost: alone, Beside: beside, CollectiveDraws: true})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "drawn", got.StepMS, 37.75, 4*drawsSE([]float64{34, 41.5}))
}

// A cost model without measured times (a fit, NCCL's tables) draws nothing:
// the same step and the same combinations as without draws.
func TestCollectiveDrawsWithoutSamplesChangeNothing(t *testing.T) {
	for _, overlap := range []bool{true, false} {
		o := Options{Ranks: 2, Overlap: overlap, Cost: fixed{latMS: 1, msPerByte: 1e-3}}
		want, err := SimulateRanks([]Profile{profile3(), profile3()}, o)
		if err != nil {
			t.Fatal(err)
		}
		o.CollectiveDraws = true
		got, err := SimulateRanks([]Profile{profile3(), profile3()}, o)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "step", got.StepMS, want.StepMS)
		if got.Draws != want.Draws {
			t.Errorf("overlap %v: %d draws, want %d", overlap, got.Draws, want.Draws)
		}
	}
}

// The calibration keeps each size's times ascending with their median and
// mean; a scaled model (the band) scales them as it scales the time.
func TestCalibratedBucketsKeepTheirTimes(t *testing.T) {
	steps := [][]Bucket{
		{{Op: AllReduce, Bytes: 1000, MS: 9}, {Op: AllReduce, Bytes: 5000, MS: 2}},
		{{Op: AllReduce, Bytes: 1000, MS: 1}},
		{{Op: AllReduce, Bytes: 1000, MS: 2}},
	}
	got := calibratedBuckets(steps)
	if len(got) != 2 || got[0].Bytes != 1000 || len(got[0].Times) != 3 {
		t.Fatalf("calibrated buckets %+v, want 1000 B with 3 times and 5000 B", got)
	}
	near(t, "median", got[0].MS, 2)
	near(t, "mean", got[0].MeanMS, 4)
	if got[0].Times[0] != 1 || got[0].Times[2] != 9 {
		t.Errorf("times %v, want ascending", got[0].Times)
	}
	c := Calibrated{Ranks: 2, Buckets: got}
	s := scaled{c, 1.5}.Samples(AllReduce, 1000, 2)
	if len(s) != 3 || s[2] != 13.5 {
		t.Errorf("scaled samples %v, want 1.5, 3, 13.5", s)
	}
	if c.Samples(AllReduce, 1000, 4) != nil || c.Samples(AllReduce, 2000, 2) != nil {
		t.Error("samples for another rank count or size, want none")
	}
}

// With κ as a pace (2: the backward at half its pace while a collective
// runs) the pace lost is set again for each drawn time: one bucket ready as
// the 20 ms backward starts, its times {4, 60}. At 4 the backward does 2 ms
// of work in 4 and ends at 22 (step 14 + 22 = 36); at 60 it computes at half
// pace throughout, ends at 40, the collective at 60 (step 74): 55 on
// average. At the median (32) it would be 14 + 36 = 50.
func TestCollectiveDrawsWithThePaceKappa(t *testing.T) {
	med, got := drawnBucket(t, []float64{4, 60}, 0, Options{Overlap: true, Kappa: 2})
	near(t, "at the median", med.StepMS, 50)
	within(t, "drawn", got.StepMS, 55, 4*drawsSE([]float64{36, 74}))
}
