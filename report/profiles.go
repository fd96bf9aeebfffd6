package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/store"
)

// Profiles is the report's kernel-mix section (knob profile): each trial's
// profile (rank 0, averaged over its launches), what changed in the mix
// between the baseline and each trial of a one-at-a-time sweep, and every
// trace file. Nil when no trial was profiled.
type Profiles struct {
	Trials     []TrialProfile  `json:"trials"`
	Changes    []ProfileChange `json:"changes,omitempty"`
	Categories []string        `json:"categories"` // present in some trial, in the table's order
	// OverheadShare and ExtraWallMS are the profiler's cost: the mean over
	// profiled trials of how much slower the profiled steps ran than the
	// measured ones, and of the wall time each launch spent profiling.
	OverheadShare float64 `json:"overhead_share"`
	ExtraWallMS   float64 `json:"extra_wall_ms"`
	// LinkBase is prepended to trace paths (run-directory relative) when the
	// report is written outside the run directory.
	LinkBase string `json:"-"`
}

// TrialProfile is one trial's profile and its traces.
type TrialProfile struct {
	ID       string            `json:"id"`
	Changed  map[string]string `json:"changed"` // knobs that differ from the baseline
	Baseline bool              `json:"baseline,omitempty"`
	Profile  *profile.Summary  `json:"profile,omitempty"` // rank 0, mean over launches
	Traces   []TraceLink       `json:"traces,omitempty"`
	Errors   []string          `json:"errors,omitempty"` // launches without a profile, and why
}

// TraceLink is one rank's trace of one launch.
type TraceLink struct {
	Repeat int    `json:"repeat"`
	Rank   int    `json:"rank"`
	Path   string `json:"path"` // relative to the run directory
	Bytes  int64  `json:"bytes"`
}

// ProfileChange is what one knob did to the kernel mix: the trial that
// differs from the baseline in that knob only, against the baseline.
type ProfileChange struct {
	Knob     string   `json:"knob"`
	Value    string   `json:"value"`
	Trial    string   `json:"trial"`
	Baseline string   `json:"baseline"`
	Deltas   []string `json:"deltas"` // "idle 48% → 3%", "batchnorm 24.1 → 15.0 ms/step", ...
	Text     string   `json:"text"`   // "graphs=true: idle 48% → 3%; ..."
}

// buildProfiles collects the profiles of the run's trials (records by ID,
// report rows in order); nil when none has one.
func buildProfiles(byID map[string]*store.TrialRecord, trials []Trial) *Profiles {
	ps := &Profiles{}
	seen := map[string]bool{}
	var base *TrialProfile
	var overheads, extras []float64
	for _, t := range trials {
		rec := byID[t.ID]
		if rec == nil {
			continue
		}
		tp := TrialProfile{ID: t.ID, Changed: changedKnobs(&t), Baseline: t.Baseline}
		profiled := false
		for _, rp := range rec.Repeats {
			for _, rk := range rp.Ranks {
				p := rk.Profile
				if p == nil {
					continue
				}
				profiled = true
				if p.Trace != "" {
					tp.Traces = append(tp.Traces, TraceLink{Repeat: rp.Repeat, Rank: rk.Rank, Path: p.Trace, Bytes: p.TraceBytes})
				}
				switch {
				case p.Error != "":
					tp.Errors = append(tp.Errors, fmt.Sprintf("repeat %d rank %d: %s", rp.Repeat, rk.Rank, p.Error))
				case p.TraceError != "":
					tp.Errors = append(tp.Errors, fmt.Sprintf("repeat %d rank %d: no trace: %s", rp.Repeat, rk.Rank, p.TraceError))
				}
			}
		}
		if !profiled {
			continue
		}
		tp.Profile = profile.Mean(rec.Profiles(0))
		if p := tp.Profile; p != nil {
			for _, c := range p.Categories {
				seen[c.Category] = true
			}
			overheads = append(overheads, p.OverheadShare)
			extras = append(extras, p.ExtraWallMS)
		}
		ps.Trials = append(ps.Trials, tp)
		if tp.Baseline {
			base = &ps.Trials[len(ps.Trials)-1]
		}
	}
	if len(ps.Trials) == 0 {
		return nil
	}
	for _, r := range profile.Rules() {
		if seen[r.Name] {
			ps.Categories = append(ps.Categories, r.Name)
		}
	}
	ps.OverheadShare, ps.ExtraWallMS = meanOf(overheads), meanOf(extras)
	if base != nil && base.Profile != nil {
		for _, tp := range ps.Trials {
			if len(tp.Changed) != 1 || tp.Profile == nil {
				continue
			}
			for k, v := range tp.Changed {
				ps.Changes = append(ps.Changes, profileChange(k, v, tp.ID, base.ID, base.Profile, tp.Profile))
			}
		}
	}
	return ps
}

// Thresholds of what a change lists: a category whose time moved by at least
// minCategoryDelta of the baseline's step (at most maxCategoryDeltas of them,
// largest first), the kernel count when it moved by minCountDelta.
const (
	minCategoryDelta  = 0.03
	maxCategoryDeltas = 4
	minCountDelta     = 0.10
)

// profileChange describes what knob=value did to the mix, from the
// baseline's profile a to the trial's b.
func profileChange(knob, value, trial, baseline string, a, b *profile.Summary) ProfileChange {
	c := ProfileChange{Knob: knob, Value: value, Trial: trial, Baseline: baseline}
	stepA, stepB := stepOf(a), stepOf(b)
	c.Deltas = append(c.Deltas, fmt.Sprintf("step %s → %s ms", Num(stepA), Num(stepB)))
	c.Deltas = append(c.Deltas, fmt.Sprintf("%s %s → %s", idleWord(a), pct(a.IdleShare), pct(b.IdleShare)))
	type move struct {
		cat  string
		d    float64
		a, b float64
	}
	var moves []move
	for _, r := range profile.Rules() {
		ma, mb := a.MS(r.Name), b.MS(r.Name)
		if stepA > 0 && math.Abs(mb-ma) >= minCategoryDelta*stepA {
			moves = append(moves, move{r.Name, mb - ma, ma, mb})
		}
	}
	sort.SliceStable(moves, func(i, j int) bool { return math.Abs(moves[i].d) > math.Abs(moves[j].d) })
	for i, m := range moves {
		if i == maxCategoryDeltas {
			break
		}
		d := fmt.Sprintf("%s %s → %s ms (%s → %s of kernel time)", m.cat, Num(m.a), Num(m.b),
			pct(a.Share(m.cat)), pct(b.Share(m.cat)))
		if ka, kb := topOf(a, m.cat), topOf(b, m.cat); ka != "" && kb != "" && ka != kb {
			d += fmt.Sprintf("; its top kernel %s instead of %s", shortName(kb), shortName(ka))
		}
		c.Deltas = append(c.Deltas, d)
	}
	if a.KernelsPerStep > 0 && math.Abs(b.KernelsPerStep-a.KernelsPerStep) >= minCountDelta*a.KernelsPerStep {
		c.Deltas = append(c.Deltas, fmt.Sprintf("kernels per step %.0f → %.0f", a.KernelsPerStep, b.KernelsPerStep))
	}
	if b.CommMS > 0 || a.CommMS > 0 {
		c.Deltas = append(c.Deltas, fmt.Sprintf("exposed communication %s → %s ms", Num(a.ExposedCommMS), Num(b.ExposedCommMS)))
	}
	c.Text = knob + "=" + value + ": " + strings.Join(c.Deltas[1:], "; ") + " (" + c.Deltas[0] + ")"
	return c
}

// stepOf is the step a profile's idle share is judged against.
func stepOf(p *profile.Summary) float64 {
	if p.IdleOf == "measured" && p.StepMS > 0 {
		return p.StepMS
	}
	return p.ProfiledStepMS
}

// idleWord names the idle time: the GPU's, or the host's between operators.
func idleWord(p *profile.Summary) string {
	if p.Device == "cuda" {
		return "GPU idle"
	}
	return "idle"
}

// topOf is the name of a category's largest kernel among the profile's top
// kernels ("" when none is listed).
func topOf(p *profile.Summary, category string) string {
	for _, k := range p.Top {
		if k.Category == category {
			return k.Name
		}
	}
	return ""
}

// shortName is a kernel name without its template arguments, at most 60
// characters: "void at::native::batch_norm_collect_statistics_kernel<...>" ->
// "at::native::batch_norm_collect_statistics_kernel".
func shortName(name string) string {
	name = strings.TrimPrefix(name, "void ")
	if i := strings.IndexAny(name, "<("); i > 0 {
		name = name[:i]
	}
	if r := []rune(name); len(r) > 60 {
		name = string(r[:59]) + "…"
	}
	return name
}

// pct is a share as a percentage: whole numbers from 10%, one decimal below.
func pct(f float64) string {
	if math.Abs(f) >= 0.1 {
		return fmt.Sprintf("%.0f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

func meanOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// profiledTrials are the trials with a profile, in report order.
func (ps *Profiles) profiledTrials() []*TrialProfile {
	var out []*TrialProfile
	for i := range ps.Trials {
		if ps.Trials[i].Profile != nil {
			out = append(out, &ps.Trials[i])
		}
	}
	return out
}

// link is a trace's path as the report links it.
func (ps *Profiles) link(path string) string {
	if ps.LinkBase == "" {
		return path
	}
	return strings.TrimSuffix(ps.LinkBase, "/") + "/" + path
}

// label is the trial's ID with its changed knobs, or "(baseline)".
func (tp *TrialProfile) label() string {
	if tp.Baseline {
		return tp.ID + " (baseline)"
	}
	if len(tp.Changed) == 0 {
		return tp.ID
	}
	keys := slices.Sorted(maps.Keys(tp.Changed))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + tp.Changed[k]
	}
	return tp.ID + " (" + strings.Join(parts, ", ") + ")"
}
