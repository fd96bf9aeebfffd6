package predict

import (
	"fmt"
	"math/rand/v2"

	"github.com/casestudy/casestudy/engine"
)

// maxTuples bounds the rank draws of SimulateRanks: every combination of
// the measured steps when there are at most this many, else this many drawn
// with a fixed seed (the same inputs give the same prediction).
const maxTuples = 1 << 14

// RanksResult is the expected step of N ranks, each running one of the
// measured one-rank steps.
type RanksResult struct {
	StepMS float64 `json:"step_ms"` // mean over the draws
	Draws  int     `json:"draws"`   // N-rank combinations of measured steps averaged
	Steps  int     `json:"steps"`   // measured one-rank steps drawn from
}

// SimulateRanks is the step of a synchronous data-parallel world as its
// measurement defines it (the mean step time; runs.Measured): N ranks, each
// running a measured step of the one rank, drawn independently from steps
// (each a one-step Profile of the same trial). A rank's part of a step is
// its tail and optimizer (after the previous step's last collective),
// forward and backward; bucket b is ready when it is ready on every rank,
// starts when ready and the previous bucket ended, and the step ends when
// the last bucket ended and every rank's backward did (overlap off: the
// collectives start after the slowest rank's backward); a collective runs at
// its pace beside compute (Options.Beside) until every rank's backward ended,
// and the backwards compute at 1/κ of their pace while it runs (Simulate). With one rank it is
// Simulate's step, step by step; with N it adds what the median profile
// leaves out: the mean above the median of a noisy rank, and the wait for
// the slowest of N (the rank skew that each collective's start absorbs).
func SimulateRanks(steps []Profile, o Options) (RanksResult, error) {
	sets := make([][]Profile, max(o.Ranks, 1))
	for i := range sets {
		sets[i] = steps
	}
	return SimulateRankSets(sets, o)
}

// SimulateRankSets is SimulateRanks with rank i drawing its steps from
// sets[i] alone (each set one measured launch: a process of its own, as each
// rank of the N-rank run is; PredictTrial): what differs between processes
// for a whole launch (the core a process ran on, what shared it) then
// differs between the ranks, as it does in the N-rank run. Every set must
// hold steps of the same trial; len(sets) must be o.Ranks.
func SimulateRankSets(sets [][]Profile, o Options) (RanksResult, error) {
	return simulateRankSets(sets, o, o.bucketCosts)
}

// simulateRankSets is SimulateRankSets with the bucket costs from costs
// (the first step's buckets). It does not change what costs gives: the
// collectives' drawn times go to a copy.
func simulateRankSets(sets [][]Profile, o Options, costs costsFunc) (RanksResult, error) {
	kappa, cs, err := o.factors()
	if err != nil {
		return RanksResult{}, err
	}
	if len(sets) != o.Ranks {
		return RanksResult{}, fmt.Errorf("predict: %d sets of steps for %d ranks", len(sets), o.Ranks)
	}
	var steps []Profile // every set's steps, set by set
	first := make([]int, len(sets))
next:
	for i, set := range sets {
		if len(set) == 0 {
			return RanksResult{}, fmt.Errorf("predict: no measured steps for rank %d", i)
		}
		for j := range i { // the same steps as an earlier rank's (SimulateRanks): held once
			if len(sets[j]) == len(set) && &sets[j][0] == &set[0] {
				first[i] = first[j]
				continue next
			}
		}
		first[i] = len(steps)
		steps = append(steps, set...)
	}
	// κ multiplies the backward and its ready times only when it is the
	// whole backward's (KappaWhole); else it is a pace while a collective
	// runs, in the stretcher, as in Simulate.
	pace := o.kappaPace(kappa)
	if !o.Overlap || !o.KappaWhole {
		kappa = 1
	}
	nb := len(steps[0].Buckets)
	bc, err := costs(steps[0].Buckets, steps[0].World)
	if err != nil {
		return RanksResult{}, err
	}
	sampled := bc.sampled()
	if sampled { // each step's draws overwrite the times (bucketCosts.draw)
		bc = bc.clone()
	}
	cost, beside, steal := bc.cost, bc.beside, bc.steal
	// Each step's times as the simulation uses them.
	type rankStep struct {
		pre, bwd float64 // tail + optimizer + forward; backward
		ready    []float64
	}
	rs := make([]rankStep, len(steps))
	for i, p := range steps {
		if len(p.Buckets) != nb {
			return RanksResult{}, fmt.Errorf("measured step %d has %d buckets, the first %d", i, len(p.Buckets), nb)
		}
		tail, err := p.tailCompute()
		if err != nil {
			return RanksResult{}, err
		}
		r := rankStep{pre: (p.ForwardMS + tail + p.OptimizerMS) * cs, bwd: p.BackwardMS * cs * kappa, ready: make([]float64, nb)}
		for b, bk := range p.Buckets {
			if o.Overlap && bk.ReadyMS < 0 {
				return RanksResult{}, fmt.Errorf("bucket %d has no ready time: the one-rank run must have ddp.overlap true", b)
			}
			r.ready[b] = bk.ReadyMS * cs * kappa
		}
		rs[i] = r
	}

	ready := make([]float64, nb)
	var st *stretcher // the compute the collectives take from the backward (o.Stretch, the pace κ)
	var pre, bwd []float64
	if o.Overlap && (o.Stretch != nil || pace > 1) {
		st = newStretcher(cost, beside, steal, o.Ranks)
		st.slow(pace)
		pre, bwd = make([]float64, o.Ranks), make([]float64, o.Ranks)
	}
	var drawn []int
	readyOf := func(i, b int) float64 { return rs[drawn[i]].ready[b] }
	// With o.CollectiveDraws and measured times to draw from, each step draws
	// its collectives' times (bucketCosts.draw) with a seeded generator of
	// its own, and the combinations of measured steps are repeated until
	// there are at least maxTuples draws.
	crng := rand.New(rand.NewPCG(uint64(len(rs))+1, uint64(nb)))
	step := func(tuple []int) float64 {
		if sampled {
			bc.draw(crng.Float64)
			if st != nil {
				st.fracs()
			}
		}
		if st != nil {
			for i, k := range tuple {
				pre[i], bwd[i] = rs[k].pre, rs[k].bwd
			}
			drawn = tuple
			done, end := st.run(pre, bwd, readyOf)
			return max(done, end)
		}
		done := 0.0 // every rank's backward ended
		for b := range ready {
			ready[b] = 0
		}
		for _, k := range tuple {
			r := rs[k]
			done = max(done, r.pre+r.bwd)
			for b := range ready {
				if o.Overlap {
					ready[b] = max(ready[b], r.pre+r.ready[b])
				}
			}
		}
		end := 0.0
		if !o.Overlap {
			end = done
		}
		for b := range ready {
			end = commEnd(max(ready[b], end), done, cost[b], beside[b])
		}
		return max(done, end)
	}

	n := o.Ranks
	tuple := make([]int, n) // rank i's step: an index into rs, within set i
	sum, draws := 0.0, 0
	if total, ok := product(sets, maxTuples); ok { // every combination
		reps := 1
		if sampled {
			reps = (maxTuples + total - 1) / total
		}
		for d := 0; d < total*reps; d++ {
			for i, x := 0, d%total; i < n; i++ {
				m := len(sets[i])
				tuple[i] = first[i] + x%m
				x /= m
			}
			sum += step(tuple)
		}
		draws = total * reps
	} else {
		rng := rand.New(rand.NewPCG(uint64(len(rs)), uint64(n)))
		for d := 0; d < maxTuples; d++ {
			for i := range tuple {
				tuple[i] = first[i] + rng.IntN(len(sets[i]))
			}
			sum += step(tuple)
		}
		draws = maxTuples
	}
	return RanksResult{StepMS: sum / float64(draws), Draws: draws, Steps: len(rs)}, nil
}

// product is the number of combinations of one step from each set, when it
// is at most limit.
func product(sets [][]Profile, limit int) (int, bool) {
	p := 1
	for _, s := range sets {
		if p > limit/len(s) {
			return 0, false
		}
		p *= len(s)
	}
	return p, true
}

// StepProfiles are the one-step Profiles of measured steps (FromSteps of
// each step alone).
func StepProfiles(steps []engine.StepMetrics, world int) ([]Profile, error) {
	out := make([]Profile, 0, len(steps))
	for i := range steps {
		p, err := FromSteps(steps[i:i+1], world)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
