package predict

import (
	"fmt"
	"math"
)

// Stretch is the compute a collective costs the backward it overlaps on CPU
// ranks: the communicator's thread shares the cores with the compute, so
// while a collective runs the backward loses part of its pace, a collective
// of bytes costing StealMS(bytes) = PerCallMS + PerByteMS·bytes of compute
// when it overlaps the backward throughout (a fit to `bench allreduce
// --interference`, FitStretch). Options.Stretch; docs/predict.md.
type Stretch struct {
	PerCallMS float64 `json:"per_call_ms"`
	PerByteMS float64 `json:"per_byte_ms"`
	Ranks     int     `json:"ranks"`  // the ranks of the points it was fitted to
	Source    string  `json:"source"` // what it was fitted to
}

// StealMS is the compute one collective of bytes costs the backward it
// overlaps throughout (never below 0: a fit may cross 0 where the cost is
// lost in noise).
func (s Stretch) StealMS(bytes int64) float64 {
	return math.Max(0, s.PerCallMS+s.PerByteMS*float64(bytes))
}

// Name says what the stretch is and where it comes from.
func (s Stretch) Name() string {
	return fmt.Sprintf("compute lost beside a collective: %.3f ms + %.3f ms/MiB (fit: %s)", s.PerCallMS, s.PerByteMS*(1<<20), s.Source)
}

// StretchPoint is one size's measurement: the compute a collective cost
// (StealMS, may be negative: noise) and the collective's own time beside
// the compute (CommMS).
type StretchPoint struct {
	Bytes           int64
	StealMS, CommMS float64
}

// FitStretch fits StealMS = a + b·bytes to points by least squares, each
// point's residual taken relative to its collective's time (weight 1/CommMS²:
// in units of the pace the compute loses, so the small collectives count as
// much as the large). It needs two distinct sizes; a and b are kept as
// fitted (StealMS clamps at 0).
func FitStretch(points []StretchPoint, ranks int, source string) (Stretch, error) {
	var l wls
	for _, p := range points {
		if p.Bytes <= 0 || p.CommMS <= 0 || math.IsNaN(p.StealMS) {
			return Stretch{}, fmt.Errorf("stretch fit: point %d bytes, collective %g ms, steal %g ms: bytes and time must be positive", p.Bytes, p.CommMS, p.StealMS)
		}
		l.add(p.Bytes, p.StealMS, 1/(p.CommMS*p.CommMS))
	}
	a, b, sizes := l.line()
	if sizes < 2 {
		return Stretch{}, fmt.Errorf("stretch fit: needs at least two message sizes, got %d", sizes)
	}
	return Stretch{PerCallMS: a, PerByteMS: b, Ranks: ranks, Source: source}, nil
}

// stretcher runs the overlapped schedule with the compute each collective
// steals from the backward (Options.Stretch): while collective b runs, every
// rank whose backward has not ended computes at 1 − f_b of its pace, f_b =
// min(1, steal_b / T_b) with T_b the collective's time beside compute (its
// Beside time, else its time alone), so a collective that overlaps a
// backward throughout stretches it by steal_b and one that overlaps it for
// part of its time by that part of it. Between collectives the ranks compute
// at full pace. The state is reused across the rank draws.
type stretcher struct {
	cost, beside, frac []float64 // per bucket: alone, beside compute (0: none), pace lost
	steal              []float64 // per bucket: the compute it steals overlapping a backward throughout
	pace               float64   // κ as a pace (slow; 1: none)
	anchor, prog, fin  []float64 // per rank: a wall time, the backward done by it, its end (< 0: running)
	starts, ends       []float64 // per bucket, of the last run
	readies            []float64 // per bucket, of the last run: when the slowest rank had it ready (wall time)
}

func newStretcher(cost, beside, steal []float64, ranks int) *stretcher {
	s := &stretcher{cost: cost, beside: beside, frac: make([]float64, len(cost)), steal: steal, pace: 1,
		anchor: make([]float64, ranks), prog: make([]float64, ranks), fin: make([]float64, ranks),
		starts: make([]float64, len(cost)), ends: make([]float64, len(cost)), readies: make([]float64, len(cost))}
	s.fracs()
	return s
}

// fracs sets each bucket's lost pace from its steal, its time (beside
// compute where given, else alone) and the pace κ: again after the times
// change (a step's drawn collective times, Options.CollectiveDraws).
func (s *stretcher) fracs() {
	for b := range s.cost {
		t := s.cost[b]
		if s.beside[b] > 0 {
			t = s.beside[b]
		}
		s.frac[b] = 0
		if t > 0 {
			s.frac[b] = math.Min(1, math.Max(0, s.steal[b])/t)
		}
		if s.pace > 1 {
			s.frac[b] = 1 - (1-s.frac[b])/s.pace
		}
	}
}

// run is the schedule of ranks that start their backward at pre[k], compute
// it for bwd[k] at full pace, and have bucket b ready ready(k, b) into it. It
// gives when every rank's backward ended and when the last collective did.
func (s *stretcher) run(pre, bwd []float64, ready func(k, b int) float64) (done, end float64) {
	for k := range pre {
		s.anchor[k], s.prog[k], s.fin[k] = pre[k], 0, -1
	}
	for b := range s.cost {
		readyAt := 0.0       // the wall time every rank has it ready
		for k := range pre { // ready on rank k: its anchor plus the backward left to that point
			readyAt = math.Max(readyAt, s.anchor[k]+math.Max(0, ready(k, b)-s.prog[k]))
		}
		start := math.Max(end, readyAt)
		s.readies[b] = readyAt
		f := s.frac[b]
		until := 0.0 // every rank's backward end if this collective ran on
		for k := range pre {
			if s.fin[k] < 0 {
				if p := s.prog[k] + start - s.anchor[k]; p >= bwd[k] {
					s.finish(k, s.anchor[k]+bwd[k]-s.prog[k], bwd[k])
				} else {
					s.anchor[k], s.prog[k] = start, p
				}
			}
			switch {
			case s.fin[k] >= 0:
				until = math.Max(until, s.fin[k])
			case f >= 1:
				until = math.Inf(1)
			default:
				until = math.Max(until, start+(bwd[k]-s.prog[k])/(1-f))
			}
		}
		end = commEnd(start, until, s.cost[b], s.beside[b])
		for k := range pre {
			if s.fin[k] >= 0 {
				continue
			}
			if f < 1 && start+(bwd[k]-s.prog[k])/(1-f) <= end {
				s.finish(k, start+(bwd[k]-s.prog[k])/(1-f), bwd[k])
				continue
			}
			s.anchor[k], s.prog[k] = end, s.prog[k]+(1-f)*(end-start)
		}
		s.starts[b], s.ends[b] = start, end
	}
	for k := range pre {
		if s.fin[k] < 0 {
			s.finish(k, s.anchor[k]+bwd[k]-s.prog[k], bwd[k])
		}
		done = math.Max(done, s.fin[k])
	}
	return done, end
}

// slow adds the pace κ (Options.Kappa): while a collective runs the ranks
// compute at 1/κ of the pace its steal leaves them, f_b = 1 − (1 − f_b)/κ
// (κ alone: 1 − 1/κ). A collective of time T inside the backward then
// lengthens it by T·(1 − 1/κ) (the backward does T/κ of work in T), one
// that covers it throughout multiplies it by κ.
func (s *stretcher) slow(kappa float64) {
	if kappa <= 1 {
		return
	}
	s.pace = kappa
	s.fracs()
}

// finish records rank k's backward (bwd long) as ended at t.
func (s *stretcher) finish(k int, t, bwd float64) {
	s.fin[k], s.anchor[k], s.prog[k] = t, t, bwd
}
