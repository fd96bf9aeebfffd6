package study

import (
	"fmt"
)

// Greedy drives a greedy (coordinate descent) sweep: each round varies one
// knob (in file order) around the best configuration so far; the runner
// measures the round's trials and calls Choose with the winner, which the next
// round starts from.
//
//	g, _ := study.NewGreedy(s)
//	for knob, trials, done := g.Next(); !done; knob, trials, done = g.Next() {
//	    ... run trials (an ID measured in an earlier round may be reused) ...
//	    g.Choose(bestID)
//	}
type Greedy struct {
	s       *Study
	base    map[string]string
	best    map[string]string // resolved values of the current best
	round   int               // next knob in s.Sweep.Order
	current []Trial
	dropped []Dropped
	index   map[string]int // trial ID -> index, stable across rounds
}

// NewGreedy starts a greedy sweep of s from its baseline.
func NewGreedy(s *Study) (*Greedy, error) {
	if len(s.Sweep.Order) == 0 {
		return nil, &Error{Problems: []Problem{{Pos: s.sweepPos(), Msg: "greedy sweep needs sweep.knobs"}}}
	}
	base := s.Resolve(nil)
	return &Greedy{s: s, base: base, best: copyMap(base), index: map[string]int{}}, nil
}

// Next returns the next round: its knob and trials (the current best first,
// then the best with the knob set to each listed value, invalid ones dropped).
// A round where only the current best remains is skipped. done is true when
// every knob has had its round. Calling Next without Choose keeps the best.
func (g *Greedy) Next() (knob string, trials []Trial, done bool) {
	for g.round < len(g.s.Sweep.Order) {
		knob = g.s.Sweep.Order[g.round]
		g.round++
		g.dropped = nil
		trials = nil
		seen := map[string]bool{}
		bestID := TrialID(g.best)
		candidates := []map[string]string{g.best}
		for _, v := range g.s.Sweep.Knobs[knob] {
			p := copyMap(g.best)
			p[knob] = v
			candidates = append(candidates, p)
		}
		for i, c := range candidates {
			t, reason := g.s.trial(c, g.base, 0)
			if reason == "" && seen[t.ID] {
				continue // the listed value equals the current best
			}
			if reason != "" {
				if i > 0 {
					g.dropped = append(g.dropped, Dropped{Knobs: map[string]string{knob: c[knob]}, Reason: reason})
				}
				continue
			}
			seen[t.ID] = true
			if _, ok := g.index[t.ID]; !ok {
				g.index[t.ID] = len(g.index)
			}
			t.Index = g.index[t.ID]
			trials = append(trials, t)
		}
		if len(trials) == 0 || (len(trials) == 1 && trials[0].ID == bestID) {
			continue // nothing to compare in this round
		}
		g.current = trials
		return knob, trials, false
	}
	g.current = nil
	return "", nil, true
}

// Choose carries the winner of the current round forward.
func (g *Greedy) Choose(trialID string) error {
	for _, t := range g.current {
		if t.ID == trialID {
			g.best = copyMap(t.Knobs)
			return nil
		}
	}
	return fmt.Errorf("greedy: trial %s is not in the current round", trialID)
}

// Best returns the resolved knob values of the best configuration so far.
func (g *Greedy) Best() map[string]string { return copyMap(g.best) }

// Dropped returns the combinations the current round dropped, with reasons.
func (g *Greedy) Dropped() []Dropped { return g.dropped }
