package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// ChangePoint is a step in a series of nightly values found by E-Divisive
// with means (Matteson and James, "A Nonparametric Approach for Multiple
// Change Point Analysis of Multivariate Data", JASA 2014; the detector
// MongoDB's performance CI uses): the split that maximises the energy
// distance between the values before and after it, kept when a permutation
// test says a split that large is unlikely without a change.
//
// Why not a library: pgregory.net/changepoint (ED-PELT) is the maintained Go
// package; it returns change points from a penalised cost without a
// significance level, and a nightly gate needs one it can state (p below α,
// corrected over the trials it watches). This is the single-split test of
// the paper, applied recursively (binary segmentation), on log values so
// that a 15% step weighs the same at any level.
type ChangePoint struct {
	Index  int     `json:"index"`  // first value after the change (0-based)
	Before float64 `json:"before"` // geometric mean of the values of the segment before
	After  float64 `json:"after"`  // and after (up to the next change point)
	Ratio  float64 `json:"ratio"`  // After / Before
	P      float64 `json:"p"`      // permutation p-value of the split
}

// ChangePointOptions tune FindChangePoints; zero values take the defaults.
type ChangePointOptions struct {
	Alpha        float64 // significance of each split (default 0.05)
	Permutations int     // of the permutation test (default 999)
	MinSegment   int     // fewest values on either side of a split (default 3)
	Seed         uint64  // of the permutations: the same series gives the same answer
}

// FindChangePoints returns the significant change points of xs (all
// positive), in order. Fewer than 2×MinSegment values have none.
func FindChangePoints(xs []float64, opt ChangePointOptions) []ChangePoint {
	if opt.Alpha <= 0 {
		opt.Alpha = 0.05
	}
	if opt.Permutations <= 0 {
		opt.Permutations = 999
	}
	if opt.MinSegment <= 0 {
		opt.MinSegment = 3
	}
	logs := make([]float64, len(xs))
	for i, x := range xs {
		if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		logs[i] = math.Log(x)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6361736573747564)) // "casestud"
	var cuts []int
	var ps = map[int]float64{}
	var split func(lo, hi int)
	split = func(lo, hi int) {
		seg := logs[lo:hi]
		tau, q := bestSplit(seg, opt.MinSegment)
		if tau < 0 {
			return
		}
		above := 0
		perm := make([]float64, len(seg))
		for r := 0; r < opt.Permutations; r++ {
			copy(perm, seg)
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			if _, qp := bestSplit(perm, opt.MinSegment); qp >= q {
				above++
			}
		}
		p := float64(above+1) / float64(opt.Permutations+1)
		if p >= opt.Alpha {
			return
		}
		cuts = append(cuts, lo+tau)
		ps[lo+tau] = p
		split(lo, lo+tau)
		split(lo+tau, hi)
	}
	split(0, len(logs))
	slices.Sort(cuts)
	var out []ChangePoint
	for k, c := range cuts {
		lo, hi := 0, len(logs)
		if k > 0 {
			lo = cuts[k-1]
		}
		if k+1 < len(cuts) {
			hi = cuts[k+1]
		}
		b, a := math.Exp(meanOf(logs[lo:c])), math.Exp(meanOf(logs[c:hi]))
		out = append(out, ChangePoint{Index: c, Before: b, After: a, Ratio: a / b, P: ps[c]})
	}
	return out
}

// bestSplit is the split τ of z (min values a side) with the largest
// energy statistic Q = (n1·n2/(n1+n2)) · (2·mean|x−y| − mean|x−x'| − mean|y−y'|),
// and Q; τ = -1 when z is too short.
func bestSplit(z []float64, min int) (int, float64) {
	n := len(z)
	best, bestQ := -1, math.Inf(-1)
	for tau := min; tau <= n-min; tau++ {
		x, y := z[:tau], z[tau:]
		between := meanAbsDiff(x, y)
		within := func(s []float64) float64 {
			if len(s) < 2 {
				return 0
			}
			sum := 0.0
			for i := range s {
				for j := i + 1; j < len(s); j++ {
					sum += math.Abs(s[i] - s[j])
				}
			}
			return 2 * sum / float64(len(s)*len(s)) // mean over all ordered pairs, i = j included
		}
		n1, n2 := float64(len(x)), float64(len(y))
		q := n1 * n2 / (n1 + n2) * (2*between - within(x) - within(y))
		if q > bestQ {
			best, bestQ = tau, q
		}
	}
	return best, bestQ
}

func meanAbsDiff(x, y []float64) float64 {
	sum := 0.0
	for _, a := range x {
		for _, b := range y {
			sum += math.Abs(a - b)
		}
	}
	return sum / float64(len(x)*len(y))
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
