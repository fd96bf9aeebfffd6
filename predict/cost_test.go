package predict

import (
	"math"
	"testing"
)

func TestAlphaBetaRecoversItsParameters(t *testing.T) {
	want := AlphaBeta{AlphaMS: 0.02, BetaMSPerB: 1e-7}
	var pts []Point
	for _, n := range []int64{1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26} {
		ms, _, _ := want.Time(AllReduce, n, 4)
		pts = append(pts, Point{Bytes: n, MS: ms})
	}
	got, err := FitAlphaBeta(pts, 4, "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.AlphaMS/want.AlphaMS-1) > 1e-6 || math.Abs(got.BetaMSPerB/want.BetaMSPerB-1) > 1e-6 {
		t.Errorf("fit %+v, want %+v", got, want)
	}
	if got.Ranks != 4 {
		t.Errorf("fit on %d ranks, want the points' 4", got.Ranks)
	}
	// Ring closed forms at p = 2: 2α + n·β for all-reduce, α + n/2·β for all-gather.
	ar, _, _ := got.Time(AllReduce, 1000, 2)
	ag, _, _ := got.Time(AllGather, 1000, 2)
	if math.Abs(ar-(0.04+1e-4)) > 1e-12 || math.Abs(ag-(0.02+0.5e-4)) > 1e-12 {
		t.Errorf("ring times at p=2: all-reduce %g, all-gather %g", ar, ag)
	}
}

func TestAlphaBetaRefusesBadPoints(t *testing.T) {
	if _, err := FitAlphaBeta([]Point{{1000, 1}, {1000, 1.1}}, 2, "x"); err == nil {
		t.Error("one size accepted")
	}
	if _, err := FitAlphaBeta([]Point{{1000, 2}, {2000, 1}}, 2, "x"); err == nil {
		t.Error("a time falling with size accepted")
	}
	if _, err := FitAlphaBeta([]Point{{1000, 1}, {2000, 2}}, 1, "x"); err == nil {
		t.Error("one rank accepted")
	}
}

func TestBusBW(t *testing.T) {
	// 1 GB in 5 ms on 8 ranks: algbw 200 GB/s, busbw 350.
	if got := BusBW(AllReduce, 1e9, 8, 5); math.Abs(got-350) > 1e-9 {
		t.Errorf("busbw %g", got)
	}
}
