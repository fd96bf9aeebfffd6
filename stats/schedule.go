package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Schedule decides which trials launch next, round by round, and when a
// trial stops. The runner launches what NextRound returns (in that order),
// reports every launch with Add, and commits a trial once Stopped says so.
//
//   - Fixed repeats, interleaved: every round launches each trial that still
//     needs launches once, in a fresh random order (from the seed).
//   - Fixed repeats, not interleaved: one trial after the other.
//   - repeats: auto: rounds 1..MinRepeats launch every trial. Later rounds
//     give each undecided trial one launch, on the side of its comparison
//     that leaves the larger variance of the mean (s²/n): the trial itself,
//     or the baseline (one baseline launch serves every trial that asks for
//     it). After each round in Looks every undecided trial is compared with
//     the baseline at the design's per-look level; a trial stops once its
//     interval is settled against the band (within δ, or beyond it); one
//     that is faster or slower with a band edge inside its interval goes on.
//     After round MaxRepeats every trial stops.
//
// Without a baseline there is nothing to decide: auto runs MinRepeats rounds.
type Schedule struct {
	d        Design
	level    Level
	ids      []string // plan order
	baseline string   // "" when there is none
	frozen   []float64
	values   map[string][]float64 // clean launch values
	launched map[string]int       // launches, clean or not
	stopped  map[string]string    // why a trial stopped
	round    int
	rng      *rand.Rand
}

// Stop reasons.
const (
	StopDecided = "decided"
	StopNeeded  = "every comparison with it decided" // the baseline
	StopDone    = "all its launches ran"
	StopFailed  = "failed"
	StopBudget  = "time budget spent"
)

// NewSchedule schedules the trials ids (plan order). baseline is the
// reference of auto's comparisons: one of ids, or a trial measured before
// (greedy's later rounds) whose values are given in frozen, or "" for none.
func NewSchedule(d Design, threshold float64, ids []string, baseline string, frozen []float64) *Schedule {
	s := &Schedule{d: d, level: d.Level(threshold), ids: slices.Clone(ids), baseline: baseline, frozen: frozen,
		values: map[string][]float64{}, launched: map[string]int{}, stopped: map[string]string{},
		rng: rand.New(rand.NewPCG(d.OrderSeed, 0x5eed))}
	if baseline != "" && !slices.Contains(ids, baseline) && len(frozen) == 0 {
		s.baseline = "" // a reference without launches decides nothing
	}
	return s
}

// Add records one launch of id: its value, or ok false when it measured
// nothing usable or was tainted (it still counts as launched; a tainted
// launch that the runner replaces is not reported). With a fixed number of
// repeats the trial stops as soon as it has them.
func (s *Schedule) Add(id string, value float64, ok bool) {
	s.launched[id]++
	if ok {
		s.values[id] = append(s.values[id], value)
	}
	if !s.d.Auto && s.launched[id] >= s.d.Repeats {
		s.Stop(id, StopDone)
	}
}

// Stop ends a trial (it failed, or the runner stops it).
func (s *Schedule) Stop(id, why string) {
	if _, done := s.stopped[id]; !done {
		s.stopped[id] = why
	}
}

// StopAll ends every trial still running.
func (s *Schedule) StopAll(why string) {
	for _, id := range s.ids {
		s.Stop(id, why)
	}
}

// Stopped is why id stopped, "" while it runs.
func (s *Schedule) Stopped(id string) string { return s.stopped[id] }

// Values are id's clean launch values so far.
func (s *Schedule) Values(id string) []float64 { return s.values[id] }

// Round is the number of rounds handed out so far.
func (s *Schedule) Round() int { return s.round }

func (s *Schedule) active(id string) bool { _, done := s.stopped[id]; return !done }

// baseValues are the reference's values (measured in this batch or before).
func (s *Schedule) baseValues() []float64 {
	if v, ok := s.values[s.baseline]; ok && slices.Contains(s.ids, s.baseline) {
		return v
	}
	return s.frozen
}

// others are the active trials that are compared with the baseline.
func (s *Schedule) others() []string {
	var out []string
	for _, id := range s.ids {
		if id != s.baseline && s.active(id) {
			out = append(out, id)
		}
	}
	return out
}

// NextRound is the next round's launches (nil when every trial stopped). In
// auto mode it first decides the comparisons when the last round was a look.
func (s *Schedule) NextRound() []string {
	if s.d.Auto {
		s.look()
	} else {
		for _, id := range s.ids {
			if s.active(id) && s.launched[id] >= s.d.Repeats {
				s.Stop(id, StopDone)
			}
		}
	}
	var round []string
	switch {
	case !s.d.Auto && !s.d.Interleave:
		for _, id := range s.ids {
			if s.active(id) {
				return []string{id} // one trial after the other
			}
		}
		return nil
	case !s.d.Auto || s.round < s.d.MinRepeats:
		for _, id := range s.ids {
			if s.active(id) {
				round = append(round, id)
			}
		}
	default:
		round = s.allocate()
	}
	if len(round) == 0 {
		s.StopAll(StopDone)
		return nil
	}
	s.round++
	s.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
	return round
}

// look stops decided trials after a look round, and everything after the
// last round (or, without a baseline, after the minimum).
func (s *Schedule) look() {
	if s.round == 0 {
		return
	}
	last := s.round >= s.d.MaxRepeats || (s.noReference() && s.round >= s.d.MinRepeats)
	if s.d.IsLook(s.round) && !s.noReference() {
		base := s.baseValues()
		for _, id := range s.others() {
			if _, p := decide(s.values[id], base, s.level); p.Decided() {
				s.Stop(id, StopDecided)
			}
		}
	}
	if last {
		s.StopAll(StopDone)
		return
	}
	if s.baseline != "" && slices.Contains(s.ids, s.baseline) && len(s.others()) == 0 {
		s.Stop(s.baseline, StopNeeded)
	}
}

// noReference: there is no baseline to compare with, or it failed.
func (s *Schedule) noReference() bool {
	return s.baseline == "" || s.stopped[s.baseline] == StopFailed
}

// allocate is a round after the minimum: per undecided trial, one launch on
// the side of its comparison with the larger s²/n.
func (s *Schedule) allocate() []string {
	var round []string
	baseNeeded := false
	base := s.baseValues()
	baseLive := slices.Contains(s.ids, s.baseline) && s.active(s.baseline)
	for _, id := range s.others() {
		if baseLive && varOfMean(base) > varOfMean(s.values[id]) {
			baseNeeded = true
			continue
		}
		round = append(round, id)
	}
	if baseNeeded {
		round = append(round, s.baseline)
	}
	return round
}

// varOfMean is s²/n of the log values (+Inf below two values: launch more).
func varOfMean(v []float64) float64 {
	if len(v) < 2 {
		return math.Inf(1)
	}
	ys := logs(v)
	var m float64
	for _, y := range ys {
		m += y
	}
	m /= float64(len(ys))
	var ss float64
	for _, y := range ys {
		ss += (y - m) * (y - m)
	}
	return ss / float64(len(ys)-1) / float64(len(ys))
}

// Remaining estimates the launches still to come (for progress): what the
// minimum or fixed repeats still need, and one round per active trial up to
// the next look after that.
func (s *Schedule) Remaining() int {
	n := 0
	for _, id := range s.ids {
		if !s.active(id) {
			continue
		}
		switch {
		case !s.d.Auto:
			n += max(0, s.d.Repeats-s.launched[id])
		case s.launched[id] < s.d.MinRepeats:
			n += s.d.MinRepeats - s.launched[id]
		default:
			next := s.d.MaxRepeats
			for _, l := range s.d.Looks {
				if l > s.round {
					next = l
					break
				}
			}
			n += max(1, next-s.round)
		}
	}
	return n
}
