package study

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/casestudy/casestudy/knobs"
)

// safeName is what a study name may be: it becomes a directory under results/.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// build turns the merged file into a Study, checking what needs the whole
// extends chain: required fields, presets, device/rank settings that
// contradict each other, knobs that do not apply to the model family.
func build(r, child *rawStudy, ps *problems) *Study {
	s := &Study{Baseline: map[string]string{}, Launcher: map[string]string{}, Extends: child.Ext.V}
	top := func(key string) Pos {
		if p, ok := child.sectionPos[key]; ok {
			return p
		}
		return Pos{File: child.File, Line: 1, Col: 1}
	}

	switch {
	case !child.Name.Set:
		ps.add(top("name"), "name is required (every file needs its own, even one that extends another)")
	case child.Name.Bad:
	case !safeName.MatchString(child.Name.V) || strings.Contains(child.Name.V, ".."):
		ps.add(child.Name.Pos, "name %q: use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit); it names the results directory", child.Name.V)
	default:
		s.Name = child.Name.V
	}
	s.Description = r.Description.V

	// Model.
	s.Model = Model{Family: r.Family.V, Preset: r.Preset.V, Layers: r.Layers.V, Hidden: r.Hidden.V}
	switch {
	case !r.Family.Set:
		ps.add(top("model"), "model.family is required (%s)", strings.Join(Families, " | "))
	case r.Family.Bad:
	case !contains(Families, r.Family.V):
		ps.add(r.Family.Pos, "model.family: %q is not one of %s%s", r.Family.V, strings.Join(Families, " | "),
			didYouMean(knobs.Closest(r.Family.V, Families)))
		r.Family.Bad = true
	case !r.Preset.Set:
		ps.add(top("model"), "model.preset is required for %s (%s)", r.Family.V, strings.Join(Presets[r.Family.V], " | "))
	case !r.Preset.Bad && !contains(Presets[r.Family.V], strings.ToLower(r.Preset.V)):
		ps.add(r.Preset.Pos, "model.preset: %q is not a %s preset (%s)%s", r.Preset.V, r.Family.V,
			strings.Join(Presets[r.Family.V], " | "), didYouMean(knobs.Closest(r.Preset.V, Presets[r.Family.V])))
	default:
		s.Model.Preset = strings.ToLower(r.Preset.V)
	}
	family := ""
	if r.Family.Set && !r.Family.Bad {
		family = r.Family.V
	}
	applies := func(name string, pos Pos, where string) {
		k, ok := knobs.Lookup(name)
		if ok && !k.AppliesTo(family) {
			ps.add(pos, "%s: %s applies to %s models only, not %s", where, name, strings.Join(k.Families, ", "), family)
		}
		if ok && k.Observe && strings.HasPrefix(where, "sweep") {
			ps.add(pos, "%s: %s cannot be swept: it changes what a launch records, not what it measures; "+
				"set it in baseline (or run --%s N) for every trial", where, name, name)
		}
	}

	// Workload.
	w := &s.Workload
	w.Device = orDefault(r.Device, "auto")
	w.GPUs, w.Nodes, w.Ranks = r.GPUs.V, max(r.Nodes.V, 1), r.Ranks.V
	if w.GPUs == gpusAll {
		w.GPUsAll, w.GPUs = true, 1 // ResolveGPUs sets the node's count
	}
	w.WarmupSteps = intOr(r.Warmup, DefaultWarmup)
	w.Steps = intOr(r.Steps, DefaultSteps)
	w.WarmupSeconds, w.MeasureSeconds = -1, -1 // the device's default (Workload.Windows)
	if r.WarmupSec.Set && !r.WarmupSec.Bad {
		w.WarmupSeconds = r.WarmupSec.V
	}
	if r.MeasureSec.Set && !r.MeasureSec.Bad {
		w.MeasureSeconds = r.MeasureSec.V
	}
	w.Repeats = intOr(r.Repeats, DefaultRepeats)
	w.MinRepeats, w.MaxRepeats = intOr(r.MinRepeats, DefaultMinRepeats), intOr(r.MaxRepeats, DefaultMaxRepeats)
	if r.MaxTime.Set && !r.MaxTime.Bad {
		w.MaxTime = r.MaxTime.V
	}
	w.Threads = r.Threads.V
	w.Interleave = !r.Interleave.Set || r.Interleave.Bad || r.Interleave.V
	w.Rehearse = r.Rehearse.Set && !r.Rehearse.Bad && r.Rehearse.V
	w.WorldOfOne = r.WorldOfOne.Set && !r.WorldOfOne.Bad && r.WorldOfOne.V
	checkRepeats(r, w, ps)
	w.Timeout = 10 * time.Minute
	if r.Timeout.Set && !r.Timeout.Bad {
		w.Timeout = r.Timeout.V
	}
	w.Seed = DefaultSeed
	if r.Seed.Set && !r.Seed.Bad {
		w.Seed = r.Seed.V
	}
	// A file contradicts itself when it sets both; a child that switches the
	// device overrides what its parent set for the other one.
	sameFile := func(p Pos) bool { return r.Device.Set && p.File == r.Device.Pos.File }
	switch w.Device {
	case "cpu":
		if r.GPUs.Set && r.GPUs.V > 0 && sameFile(r.GPUs.Pos) {
			ps.add(r.GPUs.Pos, "workload.gpus: %d GPUs contradicts device cpu; use workload.ranks for CPU ranks", r.GPUs.V)
		}
		if r.GPUs.Set && r.GPUs.V == gpusAll && sameFile(r.GPUs.Pos) {
			ps.add(r.GPUs.Pos, "workload.gpus: all contradicts device cpu; use workload.ranks for CPU ranks")
		}
		if r.ProcsPerGPU.Set && r.ProcsPerGPU.V != "1" && sameFile(r.ProcsPerGPU.Pos) {
			ps.add(r.ProcsPerGPU.Pos, "workload.procs_per_gpu contradicts device cpu; use workload.ranks for CPU ranks")
		}
		w.GPUs, w.GPUsAll = 0, false
		w.Ranks = max(w.Ranks, 1)
	case "cuda":
		if r.GPUs.Set && r.GPUs.V == 0 && sameFile(r.GPUs.Pos) {
			ps.add(r.GPUs.Pos, "workload.gpus: 0 contradicts device cuda; use device cpu for CPU runs")
		}
		w.GPUs = max(w.GPUs, 1)
		if r.Ranks.Set && sameFile(r.Ranks.Pos) {
			ps.add(r.Ranks.Pos, "workload.ranks applies to device cpu; on cuda a trial runs gpus x nodes x procs_per_gpu ranks")
		}
	default: // auto: gpus for a GPU machine, ranks for the CPU fallback
		w.GPUs = max(w.GPUs, 1)
		w.Ranks = max(w.Ranks, 1)
	}

	// Baseline: knob defaults from model and workload, then the baseline itself.
	for _, name := range r.ModelKnobs.Order {
		v := r.ModelKnobs.Values[name]
		applies(name, v.Pos, "model")
		if !v.Bad {
			s.Baseline[name] = v.V
		}
	}
	if r.ProcsPerGPU.Set && !r.ProcsPerGPU.Bad {
		s.Baseline["procs_per_gpu"] = r.ProcsPerGPU.V
	}
	for _, name := range r.Baseline.Order {
		v := r.Baseline.Values[name]
		applies(name, v.Pos, "baseline")
		if !v.Bad {
			s.Baseline[name] = v.V
		}
	}
	if w.Device == "cpu" {
		if v, ok := r.Baseline.Values["mps"]; ok && v.V == "true" {
			ps.add(v.Pos, "baseline mps: true contradicts device cpu (MPS shares a GPU)")
		}
	}
	if w.Device == "cuda" {
		w.Ranks = s.RanksFor(s.Baseline)
	}

	s.Sweep = buildSweep(r.Sweep, family, ps, applies)
	s.Objective = buildObjective(r, ps)
	if s.Objective.Metric == "memory" && w.Device == "cpu" {
		// the engine has no device memory counters on the CPU: every trial
		// would finish without a value, and the run without a winner
		ps.add(r.Metric.Pos, "objective.metric: memory needs a GPU (workload.device is cpu, where the engine measures no device memory): use throughput, or device: cuda")
	}

	// Checklist, report, compare, launcher.
	s.Checklist.Disable = r.Disable.V
	s.Checklist.Thresholds = map[string]map[string]float64{}
	s.Checklist.pos = r.ChecklistPos
	s.Checklist.section = r.sectionPos["checklist"]
	if s.Checklist.section.File == "" {
		s.Checklist.section = Pos{File: r.File}
	}
	for rule, t := range r.Thresholds {
		s.Checklist.Thresholds[rule] = map[string]float64{}
		for k, v := range t {
			if !v.Bad {
				s.Checklist.Thresholds[rule][k] = v.V
			}
		}
	}
	s.Report.Formats = append([]string(nil), ReportFormats...)
	if r.Formats.Set && !r.Formats.Bad {
		s.Report.Formats = nil
		for _, f := range r.Formats.V {
			switch {
			case !contains(ReportFormats, f):
				ps.add(r.Formats.Pos, "report.formats: %q is not one of %s%s", f, strings.Join(ReportFormats, " | "),
					didYouMean(knobs.Closest(f, ReportFormats)))
			case contains(s.Report.Formats, f):
				ps.add(r.Formats.Pos, "report.formats: %q is listed twice", f)
			default:
				s.Report.Formats = append(s.Report.Formats, f)
			}
		}
	}
	s.Compare.Threshold = 0.05
	if r.Threshold.Set && !r.Threshold.Bad {
		s.Compare.Threshold = r.Threshold.V
	}
	if r.CompareBase.Set && !r.CompareBase.Bad {
		s.Compare.Baseline = resolveRelative(r.CompareBase.Pos.File, r.CompareBase.V)
	}
	for k, v := range r.Launcher {
		if !v.Bad {
			s.Launcher[k] = v.V
		}
	}
	return s
}

func buildObjective(r *rawStudy, ps *problems) Objective {
	o := Objective{Metric: orDefault(r.Metric, "throughput")}
	natural, ok := Metrics[o.Metric]
	if !ok {
		names := make([]string, 0, len(Metrics))
		for m := range Metrics {
			names = append(names, m)
		}
		ps.add(r.Metric.Pos, "objective.metric: %q is not a metric (throughput, tokens_per_s, mfu, tflops, step_time, memory)%s",
			o.Metric, didYouMean(knobs.Closest(o.Metric, names)))
		return o
	}
	o.Goal = orDefault(r.Goal, natural)
	switch {
	case o.Goal != "max" && o.Goal != "min":
		ps.add(r.Goal.Pos, "objective.goal: %q is not max or min", o.Goal)
	case o.Goal != natural:
		ps.add(r.Goal.Pos, "objective.goal: %s contradicts objective.metric %s, where %s is better", o.Goal, o.Metric,
			map[string]string{"max": "higher", "min": "lower"}[natural])
	}
	return o
}

func orDefault(v val[string], def string) string {
	if !v.Set || v.Bad {
		return def
	}
	return v.V
}

func intOr(v val[int], def int) int {
	if !v.Set || v.Bad {
		return def
	}
	return v.V
}

// buildSweep checks the sweep against its strategy.
func buildSweep(r *rawSweep, family string, ps *problems, applies func(string, Pos, string)) Sweep {
	sw := Sweep{Strategy: "one-at-a-time", Knobs: map[string][]string{}}
	if r == nil {
		return sw // no sweep: the plan is the baseline alone
	}
	sw.pos = r.Pos
	if !r.Strategy.Set {
		ps.add(r.Pos, "sweep.strategy is required (%s)", strings.Join(Strategies, " | "))
	} else if !r.Strategy.Bad {
		sw.Strategy = r.Strategy.V
	}
	for _, a := range r.Knobs {
		applies(a.Name, a.Pos, "sweep")
		sw.Order = append(sw.Order, a.Name)
		for _, v := range a.Values {
			sw.Knobs[a.Name] = append(sw.Knobs[a.Name], v.V)
		}
	}
	if r.Strategy.Set && !r.Strategy.Bad {
		switch sw.Strategy {
		case "list":
			if !r.TrialsSet || len(r.Trials) == 0 {
				ps.add(r.Pos, "sweep: strategy list needs sweep.trials (a list of knob mappings)")
			}
			if r.KnobsSet {
				ps.add(r.Pos, "sweep: strategy list takes sweep.trials, not sweep.knobs")
			}
		default:
			if !r.KnobsSet || len(r.Knobs) == 0 && len(ps.list) == 0 {
				ps.add(r.Pos, "sweep: strategy %s needs sweep.knobs (knob: [values, ...])", sw.Strategy)
			}
			if r.TrialsSet {
				ps.add(r.Pos, "sweep: sweep.trials is for strategy list; strategy %s takes sweep.knobs", sw.Strategy)
			}
		}
	}
	for _, p := range r.Trials {
		for _, name := range p.Order {
			applies(name, p.Values[name].Pos, "sweep.trials")
		}
		sw.Trials = append(sw.Trials, p.plain())
	}
	for _, p := range r.Exclude {
		sw.Exclude = append(sw.Exclude, p.plain())
	}
	for _, c := range r.Constraints {
		sw.Constraints = append(sw.Constraints, c.Src)
		sw.exprs = append(sw.exprs, c.Expr)
	}
	if r.MaxTrials.Set && !r.MaxTrials.Bad {
		sw.MaxTrials = r.MaxTrials.V
	}
	sw.AllowNVLS = r.AllowNVLS.V && !r.AllowNVLS.Bad
	sw.AllowTPAcrossNodes = r.AllowTPAcrossNodes.V && !r.AllowTPAcrossNodes.Bad
	return sw
}

// String describes a sweep axis for messages.
func (s Sweep) String() string {
	parts := make([]string, len(s.Order))
	for i, k := range s.Order {
		parts[i] = fmt.Sprintf("%s(%d)", k, len(s.Knobs[k]))
	}
	return s.Strategy + " " + strings.Join(parts, " ")
}

// checkRepeats refuses min_repeats/max_repeats that cannot apply: with a
// fixed number of repeats written in the same file, or min above max; and
// repeats: auto with interleave: false in the same file (auto decides
// between rounds).
func checkRepeats(r *rawStudy, w *Workload, ps *problems) {
	sameFile := func(a, b Pos) bool { return a.File == b.File }
	auto := r.Repeats.Set && !r.Repeats.Bad && r.Repeats.V == 0
	for _, v := range []struct {
		name string
		val  val[int]
	}{{"min_repeats", r.MinRepeats}, {"max_repeats", r.MaxRepeats}} {
		if v.val.Set && r.Repeats.Set && !r.Repeats.Bad && !auto && sameFile(v.val.Pos, r.Repeats.Pos) {
			ps.add(v.val.Pos, "workload.%s applies to repeats: auto; with repeats: %d every trial gets %d launches (remove %s or write repeats: auto)",
				v.name, r.Repeats.V, r.Repeats.V, v.name)
		}
	}
	if w.MinRepeats > w.MaxRepeats && !r.MinRepeats.Bad && !r.MaxRepeats.Bad {
		pos := r.MaxRepeats.Pos
		if !r.MaxRepeats.Set {
			pos = r.MinRepeats.Pos
		}
		ps.add(pos, "workload.max_repeats: %d is below min_repeats %d", w.MaxRepeats, w.MinRepeats)
	}
	if auto && r.Interleave.Set && !r.Interleave.Bad && !r.Interleave.V && sameFile(r.Interleave.Pos, r.Repeats.Pos) {
		ps.add(r.Interleave.Pos, "workload.interleave: false contradicts repeats: auto, which launches in interleaved rounds and decides between them")
	}
	if auto {
		w.Interleave = true
	}
}
