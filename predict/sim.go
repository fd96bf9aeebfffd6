package predict

import (
	"errors"
	"fmt"
	"slices"
)

// Profile is what one measured step of a one-rank run (a world of one with
// the reducer on: dist.backend set, ddp.overlap true) says about a trial,
// usually the median over its measured steps (Median).
type Profile struct {
	ForwardMS   float64  `json:"forward_ms"`
	BackwardMS  float64  `json:"backward_ms"`
	TailMS      float64  `json:"tail_ms"` // the reducer's finalize: wait, divide or cast back
	OptimizerMS float64  `json:"optimizer_ms"`
	World       int      `json:"world"` // ranks of the measured run (1)
	Buckets     []Bucket `json:"buckets"`
}

// Bucket is one gradient bucket as the measured run saw it.
type Bucket struct {
	Op      string  `json:"op"`       // all_reduce | all_gather (top-k)
	Bytes   int64   `json:"bytes"`    // on the wire at World ranks (all_gather: the gathered output)
	ReadyMS float64 `json:"ready_ms"` // since the backward started; < 0 unknown
	MS      float64 `json:"ms"`       // the collective's time at World ranks
}

// Options is the machine and schedule a prediction is for.
type Options struct {
	Ranks   int
	Overlap bool // ddp.overlap: buckets launch as they become ready
	// Kappa is the backward's slowdown beside a concurrent collective (1:
	// none; the κ calibration). By default it is a pace: while a collective
	// runs the ranks compute at 1/κ of their pace and at full pace between
	// collectives (stretcher), as the memory-streaming calibration measures
	// it (a load that runs through the whole backward).
	Kappa float64
	// KappaWhole: Kappa is the whole backward's ratio beside the trial's own
	// collectives as they ran (the stretch calibration, which already
	// integrates when they overlap it), so the backward and every ready time
	// are multiplied by it.
	KappaWhole bool
	// ComputeScale multiplies every compute time (forward, backward, ready
	// times, tail, optimizer): 1 on GPUs (one GPU per rank); on CPU ranks the
	// share of cores each rank loses, max(1, ranks·threads/cores).
	ComputeScale float64
	Cost         CostModel
	// Beside is the collectives' cost while the ranks compute (CPU ranks: a
	// benchmark beside busy compute threads, bench allreduce --beside); nil:
	// Cost throughout. A collective runs at Beside's pace until every rank's
	// backward ended and at Cost's after (commEnd).
	Beside CostModel
	// Stretch is the compute a collective costs the backward it overlaps
	// (CPU ranks: bench allreduce --interference); nil: none. With overlap,
	// each collective slows every backward it overlaps (stretcher).
	Stretch *Stretch
	// CollectiveDraws: where the cost model holds a collective's measured
	// times (Sampled: the stretch calibration's), each simulated N-rank step
	// (SimulateRankSets) draws every bucket's time from them, one quantile
	// for its time alone and beside compute, so that the predicted mean step
	// carries the collectives' spread (a few of them stalling for
	// milliseconds) as it carries the ranks' compute spread; false: every
	// collective at the model's time (the calibration's median). Simulate,
	// the median profile, always uses the model's time.
	CollectiveDraws bool
}

// commEnd is when a collective that starts at start ends, done being when
// the ranks' compute ends: at the pace of its time beside compute (beside;
// 0: none) before done, at its time alone after.
func commEnd(start, done, alone, beside float64) float64 {
	if beside <= 0 || start >= done {
		return start + alone
	}
	if start+beside <= done {
		return start + beside
	}
	return done + (1-(done-start)/beside)*alone
}

// factors checks o and gives its κ and compute scale (0: 1).
func (o Options) factors() (kappa, cs float64, err error) {
	if o.Ranks < 1 {
		return 0, 0, fmt.Errorf("predict: ranks must be at least 1, got %d", o.Ranks)
	}
	if o.Cost == nil {
		return 0, 0, errors.New("predict: no cost model")
	}
	kappa, cs = o.Kappa, o.ComputeScale
	if kappa == 0 {
		kappa = 1
	}
	if cs == 0 {
		cs = 1
	}
	if kappa < 1 || cs < 1 {
		return 0, 0, fmt.Errorf("predict: kappa (%g) and compute scale (%g) must be at least 1", kappa, cs)
	}
	return kappa, cs, nil
}

// besideTime is a bucket's time beside compute (0 without o.Beside).
func (o Options) besideTime(op string, bytes int64) (float64, error) {
	if o.Beside == nil {
		return 0, nil
	}
	ms, _, err := o.Beside.Time(op, bytes, o.Ranks)
	return ms, err
}

// stealTime is the compute a bucket's collective costs the backward it
// overlaps throughout (0 without o.Stretch).
func (o Options) stealTime(bytes int64) float64 {
	if o.Stretch == nil {
		return 0
	}
	return o.Stretch.StealMS(bytes)
}

// bucketCosts are each bucket's collective on o.Ranks, measured at world:
// its bytes there, its time alone (and how the cost model chose it), beside
// compute (0: as alone) and the compute it steals from the backward.
type bucketCosts struct {
	bytes               []int64
	cost, beside, steal []float64
	how                 []string
	// With Options.CollectiveDraws, each bucket's measured times alone and
	// beside compute (Sampled; nil: the model's time every step).
	alone, besides [][]float64
}

// sampled says whether any bucket's time is drawn (draw).
func (c bucketCosts) sampled() bool {
	for b := range c.alone {
		if len(c.alone[b]) > 0 || len(c.besides[b]) > 0 {
			return true
		}
	}
	return false
}

// clone is c with times of its own to draw into (draw changes cost and
// beside; the rest it only reads).
func (c bucketCosts) clone() bucketCosts {
	c.cost, c.beside = slices.Clone(c.cost), slices.Clone(c.beside)
	return c
}

// draw sets each sampled bucket's time alone and beside compute to one of
// its measured times, the same quantile u for both (uniform in [0, 1)).
func (c bucketCosts) draw(u func() float64) {
	pick := func(ts []float64, q float64) float64 { return ts[min(len(ts)-1, int(q*float64(len(ts))))] }
	for b := range c.alone {
		if len(c.alone[b]) == 0 && len(c.besides[b]) == 0 {
			continue
		}
		q := u()
		if len(c.alone[b]) > 0 {
			c.cost[b] = pick(c.alone[b], q)
		}
		if len(c.besides[b]) > 0 {
			c.beside[b] = pick(c.besides[b], q)
		}
	}
}

// samples are a cost model's measured times of a collective where it holds
// them (Sampled), else nil.
func samples(m CostModel, op string, bytes int64, ranks int) []float64 {
	if s, ok := m.(Sampled); ok {
		return s.Samples(op, bytes, ranks)
	}
	return nil
}

func (o Options) bucketCosts(buckets []Bucket, world int) (bucketCosts, error) {
	n := len(buckets)
	c := bucketCosts{bytes: make([]int64, n), cost: make([]float64, n), beside: make([]float64, n),
		steal: make([]float64, n), how: make([]string, n)}
	for i, b := range buckets {
		c.bytes[i] = b.wireBytes(world, o.Ranks)
		var err error
		if c.cost[i], c.how[i], err = o.Cost.Time(b.Op, c.bytes[i], o.Ranks); err != nil {
			return bucketCosts{}, fmt.Errorf("bucket %d: %w", i, err)
		}
		if c.beside[i], err = o.besideTime(b.Op, c.bytes[i]); err != nil {
			return bucketCosts{}, fmt.Errorf("bucket %d: %w", i, err)
		}
		c.steal[i] = o.stealTime(c.bytes[i])
	}
	if o.CollectiveDraws {
		c.alone, c.besides = make([][]float64, n), make([][]float64, n)
		for i, b := range buckets {
			c.alone[i] = samples(o.Cost, b.Op, c.bytes[i], o.Ranks)
			if o.Beside != nil {
				c.besides[i] = samples(o.Beside, b.Op, c.bytes[i], o.Ranks)
			}
		}
	}
	return c, nil
}

// BucketTiming is one bucket's simulated collective.
type BucketTiming struct {
	Op      string  `json:"op"`
	Bytes   int64   `json:"bytes"`
	ReadyMS float64 `json:"ready_ms"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	MS      float64 `json:"ms"`
	How     string  `json:"how"` // the algorithm the model chose
}

// Result is a predicted step.
type Result struct {
	StepMS        float64        `json:"step_ms"`
	CommMS        float64        `json:"comm_ms"`
	ExposedCommMS float64        `json:"exposed_comm_ms"`
	Buckets       []BucketTiming `json:"buckets"`
	// StretchMS is how much longer the backward took for the collectives
	// beside it (Options.Stretch and the pace κ; 0 without).
	StretchMS float64 `json:"stretch_ms,omitempty"`
}

// wireBytes is a bucket's size at ranks from its size at the measured world:
// an all-reduce sends the same buffer; a top-k all-gather's output grows with
// the ranks (each rank's k pairs).
func (b Bucket) wireBytes(world, ranks int) int64 {
	if b.Op == AllGather {
		return b.Bytes / int64(max(world, 1)) * int64(ranks)
	}
	return b.Bytes
}

// Simulate runs the reducer's schedule on ranks (reducer.cpp): one
// communication stream in bucket order; with overlap a bucket starts at
// max(its ready time, the previous bucket's end) and the step is forward +
// max(backward, the last bucket's end) + tail + optimizer, the backward
// computing at 1/κ of its pace while a collective runs (o.Kappa, stretcher;
// o.KappaWhole: the backward and its ready times × κ); without it the
// collectives run after backward, one after another.
func Simulate(p Profile, o Options) (Result, error) {
	return simulate(p, o, o.bucketCosts)
}

// costsFunc gives the bucket costs of buckets measured at world
// (Options.bucketCosts, or PredictTrial's, computed once per trial: costMemo).
type costsFunc func(buckets []Bucket, world int) (bucketCosts, error)

// simulate is Simulate with the bucket costs from costs.
func simulate(p Profile, o Options, costs costsFunc) (Result, error) {
	kappa, cs, err := o.factors()
	if err != nil {
		return Result{}, err
	}
	tail, err := p.tailCompute()
	if err != nil {
		return Result{}, err
	}
	bwd, scale := p.BackwardMS*cs, cs
	if o.Overlap && o.KappaWhole {
		bwd, scale = bwd*kappa, scale*kappa
	}
	if pace := o.kappaPace(kappa); o.Overlap && (o.Stretch != nil || pace > 1) {
		return simulateStretched(p, costs, bwd, scale, pace, p.ForwardMS*cs+tail*cs+p.OptimizerMS*cs)
	}
	bc, err := costs(p.Buckets, p.World)
	if err != nil {
		return Result{}, err
	}
	var r Result
	end := 0.0
	if !o.Overlap {
		end = bwd
	}
	for i, b := range p.Buckets {
		n, ms, how := bc.bytes[i], bc.cost[i], bc.how[i]
		ready := bwd
		if o.Overlap {
			if b.ReadyMS < 0 {
				return Result{}, fmt.Errorf("bucket %d has no ready time: the one-rank run must have ddp.overlap true", i)
			}
			ready = b.ReadyMS * scale
		}
		start := max(ready, end)
		end = commEnd(start, bwd, ms, bc.beside[i])
		ms = end - start
		r.CommMS += ms
		r.Buckets = append(r.Buckets, BucketTiming{Op: b.Op, Bytes: n, ReadyMS: ready, StartMS: start, EndMS: end, MS: ms, How: how})
	}
	r.ExposedCommMS = max(0, end-bwd)
	r.StepMS = p.ForwardMS*cs + bwd + r.ExposedCommMS + tail*cs + p.OptimizerMS*cs
	return r, nil
}

// kappaPace is the κ that slows the backward only while a collective runs
// (1: none): κ with overlap, unless it is the whole backward's (KappaWhole).
func (o Options) kappaPace(kappa float64) float64 {
	if !o.Overlap || o.KappaWhole {
		return 1
	}
	return kappa
}

// simulateStretched is Simulate's overlapped schedule with the compute each
// collective takes from the backward (o.Stretch and the pace κ, stretcher):
// bwd is the backward at full pace, scale what ready times are multiplied
// by, rest the step's forward, tail and optimizer.
func simulateStretched(p Profile, costs costsFunc, bwd, scale, kappa float64, rest float64) (Result, error) {
	for i, b := range p.Buckets {
		if b.ReadyMS < 0 {
			return Result{}, fmt.Errorf("bucket %d has no ready time: the one-rank run must have ddp.overlap true", i)
		}
	}
	bc, err := costs(p.Buckets, p.World)
	if err != nil {
		return Result{}, err
	}
	st := newStretcher(bc.cost, bc.beside, bc.steal, 1)
	st.slow(kappa)
	done, end := st.run([]float64{0}, []float64{bwd}, func(_, b int) float64 { return p.Buckets[b].ReadyMS * scale })
	var r Result
	for i, b := range p.Buckets {
		ms := st.ends[i] - st.starts[i]
		r.CommMS += ms
		r.Buckets = append(r.Buckets, BucketTiming{Op: b.Op, Bytes: bc.bytes[i], ReadyMS: st.readies[i],
			StartMS: st.starts[i], EndMS: st.ends[i], MS: ms, How: bc.how[i]})
	}
	r.StretchMS = done - bwd
	r.ExposedCommMS = max(0, end-done)
	r.StepMS = rest + done + r.ExposedCommMS
	return r, nil
}

// tailCompute is the measured tail less what it waited for the measured
// run's own collectives (at world 1 a copy, on Gloo a hop through its
// thread): that wait is what the simulation replaces.
func (p Profile) tailCompute() (float64, error) {
	end := 0.0
	for _, b := range p.Buckets {
		ready := b.ReadyMS
		if ready < 0 { // measured with overlap off: launched after backward
			ready = p.BackwardMS
		}
		end = max(ready, end) + b.MS
	}
	return max(0, p.TailMS-max(0, end-p.BackwardMS)), nil
}

// Pipeline is a pipeline schedule's step: stages S, micro-batches M, and one
// micro-batch's forward and backward time on the slowest stage. GPipe and
// 1F1B share the bubble (S-1)/(M+S-1) of the step (Narayanan et al. 2021).
type Pipeline struct {
	Stages, MicroBatches  int
	ForwardMS, BackwardMS float64
}

// Step is the pipeline's step time and its bubble (idle) time per stage.
func (pl Pipeline) Step() (stepMS, bubbleMS float64, err error) {
	if pl.Stages < 1 || pl.MicroBatches < 1 {
		return 0, 0, fmt.Errorf("pipeline: stages (%d) and micro-batches (%d) must be at least 1", pl.Stages, pl.MicroBatches)
	}
	per := pl.ForwardMS + pl.BackwardMS
	bubble := float64(pl.Stages-1) * per
	return float64(pl.MicroBatches)*per + bubble, bubble, nil
}
