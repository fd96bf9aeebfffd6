package report

import (
	"fmt"
	"strings"

	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/store"
)

// Power is what the GPUs' power limiter cost a trial inside its measured
// windows: the mean over clean launches of the SM clock deficit (1 − mean
// SM clock / max SM clock) and of the share of the window spent capped by
// power, each launch's worst GPU. Trials on the CPU, or recorded without
// throttle counters, have none.
type Power struct {
	ClockDeficit  float64 `json:"clock_deficit"`
	PowerCapShare float64 `json:"power_cap_share"`
	Launches      int     `json:"launches"` // clean launches with throttle counters
}

// powerOf is a trial's Power, nil without throttle counters.
func powerOf(rec *store.TrialRecord) *Power {
	var p Power
	for i := range rec.Repeats {
		r := &rec.Repeats[i]
		if r.Outcome != store.OK || r.Tainted != "" {
			continue
		}
		if d, c, ok := meas.ClockDeficit(r.Throttle); ok {
			p.ClockDeficit += d
			p.PowerCapShare += c
			p.Launches++
		}
	}
	if p.Launches == 0 {
		return nil
	}
	p.ClockDeficit /= float64(p.Launches)
	p.PowerCapShare /= float64(p.Launches)
	return &p
}

// basisOf is what every clean launch's throughput divides by:
// measure.WindowBasis, "steps" (summed step times, older runs) or "mixed".
func basisOf(recs []store.TrialRecord) string {
	seen := map[string]bool{}
	for i := range recs {
		for _, r := range recs[i].Repeats {
			if r.Outcome == store.OK && r.Tainted == "" {
				b := r.Basis
				if b == "" {
					b = "steps"
				}
				seen[b] = true
			}
		}
	}
	switch {
	case len(seen) > 1:
		return "mixed"
	case seen[meas.WindowBasis]:
		return meas.WindowBasis
	case seen["steps"]:
		return "steps"
	}
	return ""
}

// basisText is the sentence of the method text that says what a launch's
// throughput divides by.
func basisText(basis string) string {
	switch basis {
	case meas.WindowBasis:
		return " A launch's samples/s (and tokens/s) is its samples over the measured window's wall clock, from the first rank's first measured step to the last rank's last, gaps between the engine's calls included."
	case "steps":
		return " A launch's samples/s (and tokens/s) is its samples over the slowest rank's summed step times (the run predates the wall-clock window; gaps between the engine's calls are left out)."
	case "mixed":
		return " Launches' samples/s divide by the measured window's wall clock in some launches and by summed step times in others (the run mixes recordings): compare the trials with care."
	}
	return ""
}

// PowerText is a sentence on the power limiter per trial, "" when no trial
// has throttle counters: "Power limit in the measured window (SM clock below
// its maximum; share of the window capped by power): baseline −2.2% (85%),
// micro_batch=32 −12.3% (99%)."
func PowerText(s *Summary) string {
	var parts []string
	seen := 0
	for i := range s.Trials {
		t := &s.Trials[i]
		if t.Power == nil {
			continue
		}
		seen++
		if t.Power.ClockDeficit < 0.0005 && t.Power.PowerCapShare < 0.005 {
			continue // not capped
		}
		parts = append(parts, fmt.Sprintf("%s −%.1f%% (%.0f%%)", labelOf(t), 100*t.Power.ClockDeficit, 100*t.Power.PowerCapShare))
	}
	switch {
	case seen == 0:
		return ""
	case len(parts) == 0:
		return "Power limit: no trial's GPU was capped by power in its measured windows."
	}
	return "Power limit in the measured window (SM clock below its maximum; share of the window capped by power), mean over clean launches: " +
		strings.Join(parts, ", ") + "."
}
