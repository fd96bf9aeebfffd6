// Package predict turns a one-rank run into predicted multi-GPU step times
// (issue 40, docs/predict.md): a collective cost model (NCCL's tuning formulas
// fed with a named topology, or an alpha-beta fit to measured points) and a
// simulator of the engine's DDP reducer schedule. Pure Go: no engine, no
// storage types; the commands hand it what a run measured.
package predict

import (
	"fmt"
	"math"
)

// The collectives the reducer issues (engine BucketMetrics.Op).
const (
	AllReduce = "all_reduce"
	AllGather = "all_gather"
)

// CostModel gives the time of one collective. bytes is nccl-tests' size: the
// buffer all-reduced, or an all-gather's whole output (ranks x each rank's part).
type CostModel interface {
	// Time is the collective's time in ms, and how it was chosen (e.g.
	// "Ring/Simple"); an error when the model cannot answer for that op or size.
	Time(op string, bytes int64, ranks int) (ms float64, how string, err error)
	// Name says where the model comes from (a topology, a fit).
	Name() string
}

// BusBW is nccl-tests' bus bandwidth in GB/s of a collective of bytes that
// took ms on ranks (doc/PERFORMANCE.md): algbw x 2(n-1)/n for all-reduce,
// algbw x (n-1)/n for all-gather.
func BusBW(op string, bytes int64, ranks int, ms float64) float64 {
	if ms <= 0 || ranks < 1 {
		return 0
	}
	alg := float64(bytes) / (ms * 1e6)
	n := float64(ranks)
	if op == AllGather {
		return alg * (n - 1) / n
	}
	return alg * 2 * (n - 1) / n
}

// AlphaBeta is the latency-bandwidth model of a ring collective (Thakur,
// Rabenseifner and Gropp, IJHPCA 2005): an all-reduce of n bytes over p ranks
// takes 2(p-1)·α + 2(p-1)/p·n·β, an all-gather of n output bytes
// (p-1)·α + (p-1)/p·n·β.
type AlphaBeta struct {
	AlphaMS    float64 // latency per ring step, ms
	BetaMSPerB float64 // ms per byte on a link
	Source     string  // what it was fitted to
	Ranks      int     // the ranks of the points it was fitted to (0: not said)
}

// Name implements CostModel.
func (m AlphaBeta) Name() string { return "alpha-beta fit: " + m.Source }

// Time implements CostModel.
func (m AlphaBeta) Time(op string, bytes int64, ranks int) (float64, string, error) {
	if ranks <= 1 {
		return 0, "one rank", nil
	}
	p := float64(ranks)
	n := float64(bytes)
	switch op {
	case AllReduce:
		return 2*(p-1)*m.AlphaMS + 2*(p-1)/p*n*m.BetaMSPerB, "ring (alpha-beta)", nil
	case AllGather:
		return (p-1)*m.AlphaMS + (p-1)/p*n*m.BetaMSPerB, "ring (alpha-beta)", nil
	}
	return 0, "", fmt.Errorf("alpha-beta model: unknown collective %q", op)
}

// Point is one measured collective: its size in bytes and time in ms.
type Point struct {
	Bytes int64
	MS    float64
}

// FitAlphaBeta fits α and β of an all-reduce over ranks to points by least
// squares on T = a + b·bytes (a = 2(p-1)α, b = 2(p-1)/p·β), weighting each
// point by 1/T² so small and large messages count alike (relative error).
// It needs at least two distinct sizes and ranks ≥ 2; the fit records ranks.
func FitAlphaBeta(points []Point, ranks int, source string) (AlphaBeta, error) {
	if ranks < 2 {
		return AlphaBeta{}, fmt.Errorf("alpha-beta fit: needs at least 2 ranks, got %d", ranks)
	}
	var l wls
	for _, pt := range points {
		if pt.MS <= 0 || pt.Bytes <= 0 {
			return AlphaBeta{}, fmt.Errorf("alpha-beta fit: point %d bytes, %g ms: both must be positive", pt.Bytes, pt.MS)
		}
		l.add(pt.Bytes, pt.MS, 1/(pt.MS*pt.MS))
	}
	a, b, sizes := l.line()
	if sizes < 2 {
		return AlphaBeta{}, fmt.Errorf("alpha-beta fit: needs at least two message sizes, got %d", sizes)
	}
	if b <= 0 || math.IsNaN(b) {
		return AlphaBeta{}, fmt.Errorf("alpha-beta fit: time does not grow with size (slope %g ms/byte): the points are noise", b)
	}
	a = math.Max(a, 0)
	p := float64(ranks)
	return AlphaBeta{AlphaMS: a / (2 * (p - 1)), BetaMSPerB: b * p / (2 * (p - 1)), Source: source, Ranks: ranks}, nil
}

// wls is a weighted least-squares line y = a + b·x over message sizes x.
type wls struct {
	sw, sx, sy, sxx, sxy float64
	sizes                map[int64]bool
}

func (l *wls) add(bytes int64, y, w float64) {
	x := float64(bytes)
	l.sw += w
	l.sx += w * x
	l.sy += w * y
	l.sxx += w * x * x
	l.sxy += w * x * y
	if l.sizes == nil {
		l.sizes = map[int64]bool{}
	}
	l.sizes[bytes] = true
}

// line is the fit and the distinct sizes it saw (a and b mean nothing below 2).
func (l *wls) line() (a, b float64, sizes int) {
	b = (l.sw*l.sxy - l.sx*l.sy) / (l.sw*l.sxx - l.sx*l.sx)
	return (l.sy - b*l.sx) / l.sw, b, len(l.sizes)
}
