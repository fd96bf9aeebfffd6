package predict

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/casestudy/casestudy/engine"
)

// TrialInput is one measured trial of a one-rank run: its knobs and each
// launch's measured steps (rank 0's).
type TrialInput struct {
	ID       string
	Knobs    map[string]string
	Launches [][]engine.StepMetrics
}

// Setup is the target a run's trials are predicted for.
type Setup struct {
	Ranks int
	Cost  CostModel
	// CostError is the cost model's relative error on its own evidence (the
	// largest error on a topology's asserted published points, or the largest
	// residual of a fit): the band scales every collective by 1 ± CostError.
	CostError    float64
	Kappa        float64
	ComputeScale float64
	// CPU ranks: the threads the one-rank run computed with (the threads each
	// target rank gets) and the cores the target ranks share; 0 on GPUs.
	Threads, Cores int
	// Calibration is where Kappa came from when it was measured (--kappa auto).
	Calibration *Calibration
	// Concurrent: CPU inputs measured as Ranks copies at once on the host
	// (sharing it as the ranks do), so ComputeScale is 1.
	Concurrent bool
	// Beside is the collectives' cost while the ranks compute (Options.Beside); nil: Cost.
	Beside CostModel
	// Stretch is the compute a collective costs the backward it overlaps (Options.Stretch); nil: none.
	Stretch *Stretch
	// LaunchPerRank: each rank of a predicted launch draws from a one-rank
	// launch of its own (rankLaunches), not every rank from the same launch.
	LaunchPerRank bool
	// CollectiveDraws: each simulated step draws its collectives' times from
	// the cost model's measured ones where it holds them (Options.CollectiveDraws).
	CollectiveDraws bool
}

// Prediction is one trial's predicted step on Setup.Ranks: never a
// measurement (docs/predict.md).
type Prediction struct {
	ID            string            `json:"id"`
	Knobs         map[string]string `json:"knobs"`
	Ranks         int               `json:"ranks"`
	Model         string            `json:"model"`
	Overlap       bool              `json:"overlap"`
	StepMS        float64           `json:"step_ms"`     // N ranks each running a measured step of a launch (SimulateRanks), median over launches
	LowMS         float64           `json:"step_ms_low"` // the band: the launches' spread and the cost model's error
	HighMS        float64           `json:"step_ms_high"`
	CommMS        float64           `json:"comm_ms"`
	ExposedCommMS float64           `json:"exposed_comm_ms"`
	SamplesPerS   float64           `json:"samples_per_s"` // all ranks
	TokensPerS    float64           `json:"tokens_per_s"`
	Buckets       []BucketTiming    `json:"buckets"`
	Inputs        Profile           `json:"inputs"` // the one-rank profile it used (medians over every measured step)
	Kappa         float64           `json:"kappa"`
	ComputeScale  float64           `json:"compute_scale"`
	Threads       int               `json:"threads,omitempty"`           // CPU ranks: the one-rank run's threads
	Cores         int               `json:"cores,omitempty"`             // CPU ranks: the cores the target ranks share
	Calibration   *Calibration      `json:"kappa_calibration,omitempty"` // κ measured (--kappa auto); absent: κ given
	Concurrent    bool              `json:"concurrent_inputs,omitempty"` // CPU inputs measured as Ranks copies at once
	CostError     float64           `json:"cost_error"`
	Launches      int               `json:"launches"`

	// MedianProfileStepMS is the step of the median one-rank profile with
	// every rank as fast as it (Simulate; Buckets, CommMS and ExposedCommMS
	// are its); RankDraws: the combinations of measured steps simulated.
	MedianProfileStepMS float64 `json:"step_ms_median_profile"`
	RankDraws           int     `json:"rank_draws"`
	// RankLaunchSets is how many sets of launches the ranks drew from
	// (rankLaunches); LaunchPerRank says each rank drew from a launch of its own.
	RankLaunchSets int    `json:"rank_launch_sets"`
	LaunchPerRank  bool   `json:"launch_per_rank,omitempty"`
	ModelBeside    string `json:"model_beside,omitempty"` // the collectives' cost beside compute (Setup.Beside)
	// Stretch: the compute a collective costs the backward (Setup.Stretch);
	// StretchMS: the median profile's backward stretched by it and by the
	// pace κ (the backward at 1/κ while a collective runs).
	Stretch   *Stretch `json:"stretch,omitempty"`
	StretchMS float64  `json:"stretch_ms,omitempty"`
	// CollectiveDraws: the rank draws drew each collective's time from the
	// calibration's measured times (Setup.CollectiveDraws, and the cost model
	// held some for this trial's buckets).
	CollectiveDraws bool `json:"collective_draws,omitempty"`
}

type scaled struct {
	CostModel
	f float64
}

func (s scaled) Time(op string, bytes int64, ranks int) (float64, string, error) {
	ms, how, err := s.CostModel.Time(op, bytes, ranks)
	return ms * s.f, how, err
}

// Samples are the model's measured times (Sampled) scaled as Time is.
func (s scaled) Samples(op string, bytes int64, ranks int) []float64 {
	ts := samples(s.CostModel, op, bytes, ranks)
	if ts == nil || s.f == 1 {
		return ts
	}
	out := make([]float64, len(ts))
	for i, t := range ts {
		out[i] = t * s.f
	}
	return out
}

// PredictTrial predicts one trial from its one-rank launches.
func PredictTrial(in TrialInput, s Setup) (Prediction, error) {
	var all []engine.StepMetrics
	for _, l := range in.Launches {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return Prediction{}, fmt.Errorf("trial %s: no measured steps", in.ID)
	}
	overlap := in.Knobs["ddp.overlap"] != "false"
	// A stretch calibration's κ is its whole backward's ratio beside its own
	// collectives; any other (the memory load's, or one given) is a pace.
	whole := s.Calibration != nil && s.Calibration.ShadowRanks > 0
	opts := Options{Ranks: s.Ranks, Overlap: overlap, Kappa: s.Kappa, KappaWhole: whole, ComputeScale: s.ComputeScale,
		Cost: s.Cost, Beside: s.Beside, Stretch: s.Stretch, CollectiveDraws: s.CollectiveDraws}
	prof, err := FromSteps(all, 1)
	if err != nil {
		return Prediction{}, fmt.Errorf("trial %s: %w", in.ID, err)
	}
	// The band: every simulation at the cost model's times (k = 0) and at
	// 1 ∓ CostError of them; each factor's bucket costs computed once
	// (costMemo), for the median profile, every set of launches and the
	// record of whether the collectives were drawn.
	band := []float64{1, 1 - s.CostError, 1 + s.CostError}
	memo := newCostMemo(opts, band)
	r, err := simulate(prof, opts, memo.at(0))
	if err != nil {
		return Prediction{}, fmt.Errorf("trial %s: %w", in.ID, err)
	}
	// The step: N ranks, each running one of the measured steps of a launch
	// (its mean step, as the measurement reports it, with the wait for the
	// slowest rank); the median over the launches (with LaunchPerRank, over
	// sets of N launches, a launch a rank: rankLaunches), as runs.Measured
	// takes the median over N-rank launches.
	profs := make([][]Profile, len(in.Launches))
	for i, l := range in.Launches {
		if profs[i], err = StepProfiles(l, 1); err != nil {
			return Prediction{}, fmt.Errorf("trial %s launch %d: %w", in.ID, i, err)
		}
	}
	var each []float64
	draws := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	sets := rankLaunches(len(in.Launches), s.Ranks, s.LaunchPerRank)
	for _, set := range sets {
		p := make([][]Profile, len(set))
		for r, l := range set {
			p[r] = profs[l]
		}
		for k := range band {
			q, err := simulateRankSets(p, memo.opts[k], memo.at(k))
			if err != nil {
				return Prediction{}, fmt.Errorf("trial %s launches %v: %w", in.ID, set, err)
			}
			if k == 0 {
				each, draws = append(each, q.StepMS), draws+q.Draws
			}
			lo, hi = math.Min(lo, q.StepMS), math.Max(hi, q.StepMS)
		}
	}
	step := Median(each)
	pr := Prediction{ID: in.ID, Knobs: in.Knobs, Ranks: s.Ranks, Model: s.Cost.Name(), Overlap: overlap,
		StepMS: step, LowMS: lo, HighMS: hi, MedianProfileStepMS: r.StepMS, RankDraws: draws, RankLaunchSets: len(sets),
		LaunchPerRank: perRankApplies(len(in.Launches), s.Ranks, s.LaunchPerRank), CommMS: r.CommMS,
		ExposedCommMS: r.ExposedCommMS, Buckets: r.Buckets, Inputs: prof, Kappa: opts.Kappa,
		ComputeScale: opts.ComputeScale, Threads: s.Threads, Cores: s.Cores, Calibration: s.Calibration, Concurrent: s.Concurrent, CostError: s.CostError, Launches: len(in.Launches)}
	if s.Beside != nil {
		pr.ModelBeside = s.Beside.Name()
	}
	if s.Stretch != nil {
		st := *s.Stretch
		pr.Stretch = &st
	}
	pr.StretchMS = r.StretchMS
	if s.CollectiveDraws {
		bc, err := memo.at(0)(prof.Buckets, prof.World)
		if err != nil {
			return Prediction{}, fmt.Errorf("trial %s: %w", in.ID, err)
		}
		pr.CollectiveDraws = bc.sampled()
	}
	if pr.Kappa == 0 {
		pr.Kappa = 1
	}
	if pr.ComputeScale == 0 {
		pr.ComputeScale = 1
	}
	if step > 0 {
		pr.SamplesPerS = float64(s.Ranks*all[0].Samples) / (step / 1e3)
		pr.TokensPerS = float64(s.Ranks*all[0].Tokens) / (step / 1e3)
	}
	return pr, nil
}

// costMemo is a trial's bucket costs at each factor of the band (opts[k]:
// the cost models scaled by it), computed once per bucket plan (the
// buckets' ops and sizes at their world: a trial's launches normally share
// one), not once per simulation.
type costMemo struct {
	opts  []Options
	plans []costPlan
}

type costPlan struct {
	buckets []Bucket
	world   int
	costs   []*bucketCosts // by factor; nil: not yet computed
}

func newCostMemo(o Options, band []float64) *costMemo {
	m := &costMemo{}
	for _, f := range band {
		k := o
		k.Cost = scaled{o.Cost, f}
		if o.Beside != nil {
			k.Beside = scaled{o.Beside, f}
		}
		m.opts = append(m.opts, k)
	}
	return m
}

// at gives the bucket costs at factor k. Factor 1 scales no time (scaled
// multiplies by 1 and keeps the samples), so it is the unscaled models'.
func (m *costMemo) at(k int) costsFunc {
	return func(buckets []Bucket, world int) (bucketCosts, error) {
		var plan *costPlan
		for i := range m.plans {
			if p := &m.plans[i]; p.world == world && slices.EqualFunc(p.buckets, buckets, func(a, b Bucket) bool { return a.Op == b.Op && a.Bytes == b.Bytes }) {
				plan = p
				break
			}
		}
		if plan == nil {
			m.plans = append(m.plans, costPlan{buckets: buckets, world: world, costs: make([]*bucketCosts, len(m.opts))})
			plan = &m.plans[len(m.plans)-1]
		}
		if plan.costs[k] == nil {
			bc, err := m.opts[k].bucketCosts(buckets, world)
			if err != nil {
				return bucketCosts{}, err
			}
			plan.costs[k] = &bc
		}
		return *plan.costs[k], nil
	}
}

// maxLaunchSets bounds the sets of launches PredictTrial draws its ranks
// from: every set when there are at most this many, else this many drawn
// with a fixed seed.
const maxLaunchSets = 64

// rankLaunches are the launches the ranks of each predicted N-rank launch
// run (set[r]: rank r's launch). By default each launch alone, all N ranks
// drawing from its steps. With perRank (Setup.LaunchPerRank) and at least N
// launches (N > 1), every set of N distinct launches (at most maxLaunchSets,
// drawn with a fixed seed past that): the ranks of an N-rank launch are N
// processes, each as one one-rank launch was, so what held for a whole
// launch (its core, what shared it; docs/predict.md "Where the step goes")
// differs between ranks as between launches.
func rankLaunches(launches, ranks int, perRank bool) [][]int {
	var out [][]int
	if !perRankApplies(launches, ranks, perRank) {
		for l := range launches {
			set := make([]int, max(ranks, 1))
			for r := range set {
				set[r] = l
			}
			out = append(out, set)
		}
		return out
	}
	if n, ok := binomial(launches, ranks, maxLaunchSets); ok {
		set := make([]int, ranks)
		for r := range set {
			set[r] = r
		}
		for range n { // the combinations in lexicographic order
			out = append(out, append([]int(nil), set...))
			i := ranks - 1
			for i >= 0 && set[i] == launches-ranks+i {
				i--
			}
			if i < 0 {
				break
			}
			set[i]++
			for j := i + 1; j < ranks; j++ {
				set[j] = set[j-1] + 1
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(uint64(launches), uint64(ranks)))
	for range maxLaunchSets {
		perm := rng.Perm(launches)[:ranks]
		sort.Ints(perm)
		out = append(out, perm)
	}
	return out
}

// binomial is C(n, k) when it is at most limit.
func binomial(n, k, limit int) (int, bool) {
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i // exact: c is C(n-k+i, i)
		if c > limit {
			return 0, false
		}
	}
	return c, true
}

// TopologyError is the largest relative error of the topology's model on its
// asserted published points (the cost part of a prediction's band).
func TopologyError(t *Topology) (float64, error) {
	worst := 0.0
	for _, p := range t.Published {
		if p.Tolerance == 0 {
			continue
		}
		ms, _, err := NCCL{Topo: t, Algo: p.Algo}.Time(p.Op, p.Bytes, p.Ranks)
		if err != nil {
			return 0, err
		}
		worst = math.Max(worst, math.Abs(BusBW(p.Op, p.Bytes, p.Ranks, ms)/p.BusBW-1))
	}
	return worst, nil
}

// FitError is the largest relative residual of a fit on its points.
func FitError(m AlphaBeta, points []Point, ranks int) float64 {
	worst := 0.0
	for _, p := range points {
		ms, _, _ := m.Time(AllReduce, p.Bytes, ranks)
		worst = math.Max(worst, math.Abs(ms/p.MS-1))
	}
	return worst
}

// perRankApplies: whether each rank of a predicted launch draws from a launch
// of its own (perRank asked, N > 1 ranks, at least N launches), as
// rankLaunches does and predicted.json records.
func perRankApplies(launches, ranks int, perRank bool) bool {
	return perRank && ranks > 1 && launches >= ranks
}
