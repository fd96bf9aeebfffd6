package stats

import (
	"cmp"
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
	Alpha float64 // significance of each split (default 0.05)
	// Permutations are the random orders of the permutation test (default:
	// 999 or ⌈20/Alpha⌉, whichever is more, so that p can fall well below
	// Alpha however small a correction makes it: 999 orders put a floor of
	// 0.001 under p, and at 5% over 50 trials nothing was ever flagged). A
	// segment of ExactOrders values or fewer is tested against every order
	// of its values instead: exact, and as cheap.
	Permutations int
	MinSegment   int    // fewest values on either side of a split (default 3)
	Seed         uint64 // of the permutations: the same series gives the same answer
}

// ExactOrders is the longest segment whose permutation test enumerates every
// order of its values (8! = 40,320) rather than drawing random ones.
const ExactOrders = 8

// WithDefaults are the options FindChangePoints runs with: zero values
// replaced by their defaults.
func (o ChangePointOptions) WithDefaults() ChangePointOptions {
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.Permutations <= 0 {
		o.Permutations = max(999, int(math.Ceil(20/o.Alpha)))
	}
	if o.MinSegment <= 0 {
		o.MinSegment = 3
	}
	return o
}

// splitFloor is the smallest p-value the permutation test can give a split
// of n values with k on its shorter side. Every order that puts the same k
// values on one side and the other n−k on the other (either way round)
// scores that split exactly as high, so at least 2·k!·(n−k)! of the n!
// orders do: p ≥ 2/C(n,k); random orders add the floor 1/(R+1) of R of
// them.
func splitFloor(n, k int, opt ChangePointOptions) float64 {
	lgC := func(n, k int) float64 {
		a, _ := math.Lgamma(float64(n + 1))
		b, _ := math.Lgamma(float64(k + 1))
		c, _ := math.Lgamma(float64(n - k + 1))
		return a - b - c
	}
	p := math.Min(1, 2*math.Exp(-lgC(n, k)))
	if n > ExactOrders {
		p = math.Max(p, 1/float64(opt.Permutations+1))
	}
	return p
}

// ChangePointReach is the fewest values the shorter side of a split of n
// values needs for FindChangePoints to be able to flag it at opt.Alpha (at
// least opt.MinSegment): a change with fewer values after it (or before it)
// cannot be found, whatever its size. 0: no split of n values can reach
// opt.Alpha (too few values for the level, e.g. fewer than 14 at 0.001).
func ChangePointReach(n int, opt ChangePointOptions) int {
	opt = opt.WithDefaults()
	for k := opt.MinSegment; 2*k <= n; k++ {
		if splitFloor(n, k, opt) < opt.Alpha {
			return k
		}
	}
	return 0
}

// ChangePointRunsNeeded is the fewest values in which some split can reach
// opt.Alpha (ChangePointReach > 0), up to limit; 0 when none up to it.
func ChangePointRunsNeeded(opt ChangePointOptions, limit int) int {
	opt = opt.WithDefaults()
	for n := 2 * opt.MinSegment; n <= limit; n++ {
		if ChangePointReach(n, opt) > 0 {
			return n
		}
	}
	return 0
}

// FindChangePoints returns the significant change points of xs (all
// positive), in order. Fewer than 2×MinSegment values have none, and neither
// has a split whose p cannot fall below Alpha (ChangePointReach).
func FindChangePoints(xs []float64, opt ChangePointOptions) []ChangePoint {
	opt = opt.WithDefaults()
	logs := make([]float64, len(xs))
	for i, x := range xs {
		if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		logs[i] = math.Log(x)
	}
	var sp splitter
	var cuts []int
	var ps = map[int]float64{}
	var split func(lo, hi int)
	split = func(lo, hi int) {
		sp.load(logs[lo:hi])
		tau, q := sp.best(opt.MinSegment)
		if tau < 0 || splitFloor(hi-lo, min(tau, hi-lo-tau), opt) >= opt.Alpha {
			return
		}
		p := sp.pValue(q, opt, uint64(lo)<<32|uint64(hi))
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

// splitter finds the best split of one segment and tests it: the
// segment's values (centred), their ranks, the order being scored (idx,
// positions in the segment) and scratch space.
type splitter struct {
	seg    []float64 // the segment, centred on its mean (|x−y| is the same; less cancellation)
	rankOf []int     // rank of seg[i] among the segment's values (ties by position)
	idx    []int     // the order scored: z[j] = seg[idx[j]]
	z      []float64
	r      []int
	pre    []float64
	suf    []float64
	cnt    []int // Fenwick trees over ranks: how many values, and their sum
	sum    []float64
}

// load makes seg the segment, in its own order.
func (sp *splitter) load(seg []float64) {
	n := len(seg)
	m := meanOf(seg)
	sp.seg = sp.seg[:0]
	for _, x := range seg {
		sp.seg = append(sp.seg, x-m)
	}
	sp.idx = sp.idx[:0]
	for i := range n {
		sp.idx = append(sp.idx, i)
	}
	byValue := slices.Clone(sp.idx)
	slices.SortStableFunc(byValue, func(a, b int) int { return cmp.Compare(sp.seg[a], sp.seg[b]) })
	sp.rankOf = slices.Grow(sp.rankOf[:0], n)[:n]
	for r, i := range byValue {
		sp.rankOf[i] = r
	}
	sp.z = slices.Grow(sp.z[:0], n)[:n]
	sp.r = slices.Grow(sp.r[:0], n)[:n]
	sp.pre = slices.Grow(sp.pre[:0], n+1)[:n+1]
	sp.suf = slices.Grow(sp.suf[:0], n+1)[:n+1]
	sp.cnt = slices.Grow(sp.cnt[:0], n+1)[:n+1]
	sp.sum = slices.Grow(sp.sum[:0], n+1)[:n+1]
}

// pValue is the permutation p-value of the best split of the loaded
// segment, which scores q: the share of the orders of its values whose best
// split scores q or more. A segment of ExactOrders values or fewer is tested
// against every order (p = count/n!), a longer one against opt.Permutations
// random orders drawn from opt.Seed and stream (p = (count+1)/(R+1)).
// Either stops as soon as p cannot fall below opt.Alpha any more: the
// answer is the same, and the p of a split not kept is never shown.
func (sp *splitter) pValue(q float64, opt ChangePointOptions, stream uint64) float64 {
	tol := 1e-9 * math.Abs(q) // the same split summed in another order
	above := 0
	if n := len(sp.idx); n <= ExactOrders {
		total := 1
		for i := 2; i <= n; i++ {
			total *= i
		}
		stop := int(math.Ceil(opt.Alpha * float64(total)))
		eachOrder(sp.idx, func() bool {
			if _, qp := sp.best(opt.MinSegment); qp >= q-tol {
				above++
			}
			return above < stop
		})
		return float64(above) / float64(total)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6361736573747564^stream)) // "casestud"
	stop := int(math.Ceil(opt.Alpha*float64(opt.Permutations+1))) - 1
	for k := 0; k < opt.Permutations && above < stop; k++ {
		rng.Shuffle(len(sp.idx), func(i, j int) { sp.idx[i], sp.idx[j] = sp.idx[j], sp.idx[i] })
		if _, qp := sp.best(opt.MinSegment); qp >= q-tol {
			above++
		}
	}
	return float64(above+1) / float64(opt.Permutations+1)
}

// eachOrder calls f after putting a in every order in turn (Heap's
// algorithm, in place), until f returns false.
func eachOrder(a []int, f func() bool) {
	c := make([]int, len(a))
	if !f() {
		return
	}
	for i := 1; i < len(a); {
		if c[i] < i {
			if i%2 == 0 {
				a[0], a[i] = a[i], a[0]
			} else {
				a[c[i]], a[i] = a[i], a[c[i]]
			}
			if !f() {
				return
			}
			c[i]++
			i = 1
		} else {
			c[i] = 0
			i++
		}
	}
}

// best is the split τ of the loaded segment in the order idx (min values a
// side) with the largest energy statistic
// Q = (n1·n2/(n1+n2)) · (2·mean|x−y| − mean|x−x'| − mean|y−y'|) (the
// within means over all ordered pairs, i = j included), and Q; τ = -1 when
// the segment is too short. O(n log n): the sums of |x−x'| within every
// prefix and suffix are running sums, each new value's distances to the
// values before it counted and summed by rank (Fenwick trees), and the sum
// between is the rest of the total.
func (sp *splitter) best(min int) (int, float64) {
	n := len(sp.idx)
	if n < 2*min {
		return -1, math.Inf(-1)
	}
	z, r := sp.z, sp.r
	for j, i := range sp.idx {
		z[j], r[j] = sp.seg[i], sp.rankOf[i]
	}
	pre, suf := sp.pre, sp.suf // pre[t]: Σ|z_i−z_j| over i<j<t; suf[t]: over t≤i<j
	pre[0] = 0
	sp.clearTrees()
	seen := 0.0
	for t := 0; t < n; t++ {
		pre[t+1] = pre[t] + sp.distances(z[t], r[t], t, seen)
		sp.add(r[t], z[t])
		seen += z[t]
	}
	suf[n] = 0
	sp.clearTrees()
	seen = 0
	for t := n - 1; t >= 0; t-- {
		suf[t] = suf[t+1] + sp.distances(z[t], r[t], n-1-t, seen)
		sp.add(r[t], z[t])
		seen += z[t]
	}
	total := pre[n]
	best, bestQ := -1, math.Inf(-1)
	for tau := min; tau <= n-min; tau++ {
		n1, n2 := float64(tau), float64(n-tau)
		between := total - pre[tau] - suf[tau]
		q := n1 * n2 / (n1 + n2) * (2*between/(n1*n2) - 2*pre[tau]/(n1*n1) - 2*suf[tau]/(n2*n2))
		if q > bestQ {
			best, bestQ = tau, q
		}
	}
	return best, bestQ
}

func (sp *splitter) clearTrees() {
	clear(sp.cnt)
	clear(sp.sum)
}

// add puts value x of rank r in the trees.
func (sp *splitter) add(r int, x float64) {
	for i := r + 1; i < len(sp.cnt); i += i & -i {
		sp.cnt[i]++
		sp.sum[i] += x
	}
}

// distances is Σ|x − y| over the k values y in the trees (summing to
// seen), x of rank r: x·(below) − Σ(below) + Σ(above) − x·(above).
func (sp *splitter) distances(x float64, r, k int, seen float64) float64 {
	c, s := 0, 0.0
	for i := r; i > 0; i -= i & -i {
		c += sp.cnt[i]
		s += sp.sum[i]
	}
	return x*float64(c) - s + (seen - s) - x*float64(k-c)
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
