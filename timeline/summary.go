package timeline

import (
	"sort"
	"time"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/store"
)

// Study is where a run's wall-clock time went, from its launches' timelines.
type Study struct {
	Launches int `json:"launches"` // launches with a timeline
	// WallMS is the run's span: the first launch's start to the last one's end.
	WallMS float64 `json:"wall_ms"`
	// Phases are the totals over every launch, in Order.
	Phases []store.Phase `json:"phases"`
	// MeasuredShare is the measured steps' time over WallMS: the share of
	// the run that measured something.
	MeasuredMS    float64 `json:"measured_ms"`
	MeasuredShare float64 `json:"measured_share"`
	// HiddenMS is the launch time that ran alongside another launch (prepared
	// ahead): the launches' total minus WallMS.
	HiddenMS float64 `json:"hidden_ms,omitempty"`
	Trials   []Trial `json:"trials"`
	// Settle is when step times settled, over the launches that say.
	Settle *Settle `json:"settle,omitempty"`
}

// Trial is one trial's launches added up.
type Trial struct {
	ID       string        `json:"id"`
	Index    int           `json:"index"`
	Launches int           `json:"launches"`
	WallMS   float64       `json:"wall_ms"`
	Phases   []store.Phase `json:"phases"`
}

// Settle summarises the launches' settle steps against the warm-up steps.
type Settle struct {
	WarmupSteps int `json:"warmup_steps"` // the run's workload.warmup_steps
	Launches    int `json:"launches"`
	Max         int `json:"max"`    // the latest settle step
	Median      int `json:"median"` // of the launches' settle steps
	// Late are the launches whose steps settled after the warm-up: their first
	// measured steps were still warming up.
	Late int `json:"late"`
	// SlowedLater are the launches that slowed down after they settled,
	// inside the measured window (LateSlowdown); PowerLimited those of them
	// whose GPU was capped by power for part of the window, with their mean
	// SM clock deficit (1 − mean / max SM clock).
	SlowedLater  int     `json:"slowed_later"`
	PowerLimited int     `json:"power_limited"`
	ClockDeficit float64 `json:"clock_deficit,omitempty"`
}

// Summarize adds up the launch timelines of a run by phase, per trial and for
// the run; nil when no launch has a timeline (runs recorded before them). The
// pre-heat launch of a GPU run (TrialRecord.Preheat) is one phase of the
// run's, preheat, and no trial's: it is not one of the trial's launches.
func Summarize(run *store.Run) *Study {
	s := &Study{}
	totals := map[string]float64{}
	var first, last time.Time
	var settles []int
	var slowed, powered int
	var deficit float64
	warmup := warmupSteps(run)
	latest := map[string]int{} // a resumed run may hold a trial twice: the last record counts
	for i, rec := range run.Trials {
		latest[rec.ID] = i
	}
	for i := range run.Trials {
		rec := &run.Trials[i]
		if latest[rec.ID] != i {
			continue
		}
		if tl := rec.Preheat; tl != nil {
			totals[PhasePreheat] += tl.WallMS()
			if first.IsZero() || tl.Start.Before(first) {
				first = tl.Start
			}
			if tl.End.After(last) {
				last = tl.End
			}
		}
		tr := Trial{ID: rec.ID, Index: rec.Index}
		byName := map[string]float64{}
		for _, rp := range rec.Repeats {
			if at, late, ok := settleOf(&rp); ok {
				settles = append(settles, at)
				if late {
					slowed++
					if d, c, ok := measure.ClockDeficit(rp.Throttle); ok && c > 0 {
						powered++
						deficit += d
					}
				}
			}
			tl := rp.Timeline
			if tl == nil {
				continue
			}
			tr.Launches++
			tr.WallMS += tl.WallMS()
			for _, p := range tl.Phases {
				byName[p.Name] += p.MS
				totals[p.Name] += p.MS
			}
			if first.IsZero() || tl.Start.Before(first) {
				first = tl.Start
			}
			if tl.End.After(last) {
				last = tl.End
			}
		}
		if tr.Launches == 0 {
			continue
		}
		tr.Phases = ordered(byName)
		s.Launches += tr.Launches
		s.Trials = append(s.Trials, tr)
	}
	if s.Launches == 0 {
		return nil
	}
	sort.SliceStable(s.Trials, func(i, j int) bool { return s.Trials[i].Index < s.Trials[j].Index })
	s.Phases = ordered(totals)
	s.WallMS = ms(last.Sub(first))
	sum := 0.0
	for _, p := range s.Phases {
		sum += p.MS
	}
	s.HiddenMS = max(0, sum-s.WallMS)
	s.MeasuredMS = totals[PhaseMeasured]
	if s.WallMS > 0 {
		s.MeasuredShare = s.MeasuredMS / s.WallMS
	}
	if len(settles) > 0 {
		sort.Ints(settles)
		st := &Settle{WarmupSteps: warmup, Launches: len(settles), Max: settles[len(settles)-1], Median: settles[len(settles)/2],
			SlowedLater: slowed, PowerLimited: powered}
		if powered > 0 {
			st.ClockDeficit = deficit / float64(powered)
		}
		for _, v := range settles {
			if v > warmup {
				st.Late++
			}
		}
		s.Settle = st
	}
	return s
}

// ordered lists the phases of byName in Order, the engine's creation phases
// where engine_create is and any unknown name last.
func ordered(byName map[string]float64) []store.Phase {
	var out []store.Phase
	seen := map[string]bool{}
	var creates []string
	for n := range byName {
		if IsCreate(n) && n != PhaseEngineCreate {
			creates = append(creates, n)
		}
	}
	sort.Strings(creates)
	for _, n := range Order {
		if n == PhaseEngineCreate {
			for _, c := range creates {
				out = append(out, store.Phase{Name: c, MS: byName[c]})
				seen[c] = true
			}
		}
		if v, ok := byName[n]; ok {
			out = append(out, store.Phase{Name: n, MS: v})
			seen[n] = true
		}
	}
	var rest []string
	for n := range byName {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	for _, n := range rest {
		out = append(out, store.Phase{Name: n, MS: byName[n]})
	}
	return out
}

// warmupSteps is the run's workload.warmup_steps (a JSON number in the
// manifest).
func warmupSteps(run *store.Run) int {
	switch v := run.Manifest.Workload["warmup_steps"].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

// settleOf is a launch's settle step, judged at the start of its window
// (SettleStep, the latest of its ranks'), and whether it slowed down later
// in the window; recomputed from the recorded steps, so that runs recorded
// with the older whole-launch rule read the same, else the recorded step.
func settleOf(rp *store.RepeatRecord) (at int, late, ok bool) {
	at = -1
	for _, rk := range rp.Ranks {
		ms := make([]float64, len(rk.Steps))
		for i, s := range rk.Steps {
			ms[i] = s.StepMS
		}
		at = max(at, SettleStep(rk.WarmupStepMS, ms))
		late = late || LateSlowdown(rk.WarmupStepMS, ms)
	}
	if at >= 0 {
		return at, late, true
	}
	if rp.SettleStep != nil && *rp.SettleStep >= 0 {
		return *rp.SettleStep, false, true
	}
	return -1, false, false
}
