package study

import (
	"fmt"
	"strings"

	"github.com/casestudy/casestudy/internal/exitcode"

	"github.com/casestudy/casestudy/knobs"
)

// DefaultMaxTrials caps how many trials a sweep may expand to unless the
// command line raises it (--max-trials).
const DefaultMaxTrials = 500

// MaxTrialsCeiling is the most trials any plan may hold, whatever
// --max-trials says: a plan costs about 8 KiB of memory per trial (measured
// with the manifest's copy), so this keeps planning under 200 MiB, and a
// sweep this large would take weeks to run anyway.
const MaxTrialsCeiling = 20000

// ExpandOptions tune Expand.
type ExpandOptions struct {
	MaxTrials int // 0: DefaultMaxTrials; sweep.max_trials may only lower it
}

// CheckMaxTrials refuses a --max-trials value outside 1..MaxTrialsCeiling
// (0 means the default).
func CheckMaxTrials(n int) error {
	if n < 0 || n > MaxTrialsCeiling {
		return exitcode.Usage(fmt.Errorf("--max-trials %d: give 1 to %d (a plan is held in memory, about 8 KiB a trial); narrow the sweep instead",
			n, MaxTrialsCeiling))
	}
	return nil
}

// Expand turns a study's sweep into a plan. The number of combinations is
// computed before anything is expanded and refused above the limit. Every
// combination the knob registry knows to be invalid or pointless, excluded by
// sweep.exclude, or failing a sweep.constraints expression is dropped with its
// reason; a combination equal to an earlier one is dropped as a duplicate.
func Expand(s *Study, opts ExpandOptions) (*Plan, error) {
	if err := CheckMaxTrials(opts.MaxTrials); err != nil {
		return nil, err
	}
	limit := opts.MaxTrials
	if limit <= 0 {
		limit = DefaultMaxTrials
	}
	lowered := false
	if s.Sweep.MaxTrials > 0 && s.Sweep.MaxTrials < limit {
		limit, lowered = s.Sweep.MaxTrials, true
	}
	size, formula := s.sweepSize(limit)
	if size > limit {
		hint := "raise the limit with --max-trials, or narrow the sweep"
		switch {
		case lowered:
			hint = "sweep.max_trials sets this limit"
		case limit >= MaxTrialsCeiling:
			hint = fmt.Sprintf("narrow the sweep: %d is the most --max-trials allows", MaxTrialsCeiling)
		}
		return nil, &Error{Problems: []Problem{{Pos: s.sweepPos(), Msg: fmt.Sprintf(
			"sweep expands to %s trials, above the limit of %d (%s)", formula, limit, hint)}}}
	}
	p := &planner{s: s, plan: &Plan{Study: s, Strategy: s.Sweep.Strategy, Limit: limit, Size: size,
		Trials: []Trial{}, Dropped: []Dropped{}, Notes: s.Notes},
		base: s.Resolve(nil), seen: map[string]string{}}
	switch s.Sweep.Strategy {
	case "grid":
		p.grid()
	case "list":
		for _, t := range s.Sweep.Trials {
			p.add(t)
		}
	case "greedy":
		g, err := NewGreedy(s)
		if err != nil {
			return nil, err
		}
		_, trials, _ := g.Next()
		p.plan.Trials, p.plan.Rounds = trials, append([]string(nil), s.Sweep.Order...)
		p.plan.Dropped = append(p.plan.Dropped, g.Dropped()...)
		for _, t := range trials {
			if len(t.Changed) == 0 {
				p.plan.BaselineID = t.ID
			}
		}
	default: // one-at-a-time, and a study without a sweep (baseline alone)
		p.add(nil)
		for _, name := range s.Sweep.Order {
			for _, v := range s.Sweep.Knobs[name] {
				if v != p.base[name] {
					p.add(map[string]string{name: v})
				}
			}
		}
	}
	if len(p.plan.Trials) == 0 {
		msg := "no trial left to run"
		if len(p.plan.Dropped) > 0 {
			msg = fmt.Sprintf("no trial left to run: all %d combinations were dropped (first: %s: %s)",
				len(p.plan.Dropped), FormatKnobs(p.plan.Dropped[0].Knobs, nil), p.plan.Dropped[0].Reason)
		}
		return nil, &Error{Problems: []Problem{{Pos: s.sweepPos(), Msg: msg}}}
	}
	return p.plan, nil
}

func (s *Study) sweepPos() Pos {
	if s.Sweep.pos.File != "" {
		return s.Sweep.pos
	}
	return Pos{File: s.Path}
}

// sweepSize counts the combinations without expanding them, saturating just
// above limit so that huge products cannot overflow.
func (s *Study) sweepSize(limit int) (int, string) {
	sw := s.Sweep
	switch sw.Strategy {
	case "list":
		return len(sw.Trials), fmt.Sprint(len(sw.Trials))
	case "grid":
		n, parts := 1, make([]string, len(sw.Order))
		for i, k := range sw.Order {
			parts[i] = fmt.Sprint(len(sw.Knobs[k]))
			if n <= limit {
				n *= len(sw.Knobs[k])
			}
		}
		return n, strings.Join(parts, "x") + fmt.Sprintf(" = %s", sizeText(n, limit))
	default: // one-at-a-time, greedy: the baseline plus each value
		n, parts := 1, []string{"1"}
		for _, k := range sw.Order {
			n += len(sw.Knobs[k])
			parts = append(parts, fmt.Sprint(len(sw.Knobs[k])))
		}
		return n, strings.Join(parts, "+") + fmt.Sprintf(" = %d", n)
	}
}

func sizeText(n, limit int) string {
	if n > limit {
		return fmt.Sprintf("more than %d", limit)
	}
	return fmt.Sprint(n)
}

// planner accumulates a plan's trials and drops.
type planner struct {
	s    *Study
	plan *Plan
	base map[string]string
	seen map[string]string // trial ID -> resolved values as text (duplicates)
}

func (p *planner) grid() {
	order := p.s.Sweep.Order
	idx := make([]int, len(order))
	for {
		point := make(map[string]string, len(order))
		for i, name := range order {
			point[name] = p.s.Sweep.Knobs[name][idx[i]]
		}
		p.add(point)
		i := len(order) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(p.s.Sweep.Knobs[order[i]]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

func (p *planner) add(point map[string]string) {
	t, reason := p.s.trial(point, p.base, len(p.plan.Trials))
	if reason == "" {
		if prev, dup := p.seen[t.ID]; dup {
			reason = "same configuration as trial " + prev
		}
	}
	if reason != "" {
		p.plan.Dropped = append(p.plan.Dropped, Dropped{Knobs: copyMap(point), Reason: reason})
		return
	}
	p.seen[t.ID] = t.ID
	if len(t.Changed) == 0 {
		p.plan.BaselineID = t.ID
	}
	p.plan.Trials = append(p.plan.Trials, t)
}

// trial resolves a sweep point and says why it must be dropped ("" if not).
func (s *Study) trial(point, base map[string]string, index int) (Trial, string) {
	values := s.Resolve(point)
	changed := changedFrom(values, base)
	t := Trial{ID: TrialID(values), Index: index, Knobs: values, Changed: changed}
	if changed == nil {
		t.Changed = []string{}
	}
	return t, s.dropReason(values, changed)
}

func (s *Study) dropReason(values map[string]string, changed []string) string {
	set := make(map[string]bool, len(changed))
	for _, c := range changed {
		set[c] = true
	}
	if r := knobs.Check(values, set, s.setting(values)); r != "" {
		return r
	}
	if r := s.seqLenReason(values); r != "" {
		return r
	}
	for i, ex := range s.Sweep.Exclude {
		if matches(values, ex) {
			return fmt.Sprintf("excluded by sweep.exclude[%d] (%s)", i, FormatKnobs(ex, nil))
		}
	}
	get := func(name string) string { return s.variable(values, name) }
	for _, e := range s.Sweep.exprs {
		if !e.Eval(get) {
			return fmt.Sprintf("constraint %q does not hold", e.Src)
		}
	}
	return ""
}

func matches(values, ex map[string]string) bool {
	if len(ex) == 0 {
		return false
	}
	for k, v := range ex {
		if values[k] != v {
			return false
		}
	}
	return true
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
