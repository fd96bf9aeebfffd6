package study

import (
	"fmt"
	"math"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/launch/setting"
)

// decodeFile reads one file's node tree into a rawStudy, reporting every
// problem (unknown keys, wrong types, values outside a knob's domain).
func decodeFile(file string, root *yaml.Node, ps *problems) *rawStudy {
	d := &decoder{file: file, ps: ps}
	if n := deref(root); n == nil || n.Kind != yaml.MappingNode {
		if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			ps.add(Pos{File: file, Line: n.Line, Col: n.Column}, "empty study: a study needs at least name and model")
		} else if n != nil {
			ps.add(d.pos(n), "study must be a mapping of keys, got %s", kindName(n))
		}
		return nil
	}
	r := &rawStudy{File: file, ModelKnobs: newPoint(Pos{File: file}), Baseline: newPoint(Pos{File: file}),
		sectionPos: map[string]Pos{}}
	d.mapping(root, "study", topKeys, func(key string, k, v *yaml.Node) {
		r.sectionPos[key] = d.pos(k)
		switch key {
		case "name":
			r.Name = d.str(v, "name")
		case "description":
			r.Description = d.str(v, "description")
		case "extends":
			r.Ext = d.str(v, "extends")
		case "model":
			d.model(v, r)
		case "workload":
			d.workload(v, r)
		case "baseline":
			r.Baseline = d.knobPoint(v, "baseline")
		case "sweep":
			r.Sweep = d.sweep(v)
		case "objective":
			d.mapping(v, "objective", objectiveKeys, func(key string, _, v *yaml.Node) {
				if key == "metric" {
					r.Metric = d.str(v, "objective.metric")
				} else {
					r.Goal = d.str(v, "objective.goal")
				}
			})
		case "checklist":
			d.checklist(v, r)
		case "report":
			d.mapping(v, "report", reportKeys, func(_ string, _, v *yaml.Node) {
				r.Formats = d.strings(v, "report.formats")
			})
		case "compare":
			d.mapping(v, "compare", compareKeys, func(key string, _, v *yaml.Node) {
				if key == "baseline" {
					r.CompareBase = d.str(v, "compare.baseline")
				} else {
					r.Threshold = d.percent(v, "compare.threshold")
				}
			})
		case "launcher":
			r.Launcher = map[string]val[string]{}
			d.mapping(v, "launcher", LauncherKeys, func(key string, _, v *yaml.Node) {
				lv := d.str(v, "launcher."+key)
				if !lv.Bad {
					if err := setting.Check(key, lv.V); err != nil {
						d.ps.add(lv.Pos, "launcher.%s: %v", key, err)
						lv.Bad = true
					}
				}
				r.Launcher[key] = lv
			})
		}
	})
	return r
}

func (d *decoder) model(n *yaml.Node, r *rawStudy) {
	d.mapping(n, "model", modelKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "family":
			r.Family = d.str(v, "model.family")
		case "preset":
			// Presets such as 50 or 1.5b may be written unquoted.
			s, ok := d.scalar(v, "model.preset")
			r.Preset = val[string]{V: s, Pos: d.pos(v), Set: true, Bad: !ok}
		case "layers":
			r.Layers = d.integer(v, "model.layers", 1, 1024)
		case "hidden":
			r.Hidden = d.integer(v, "model.hidden", 1, 1<<20)
		default: // micro_batch, seq_len, image_size: defaults of the knobs
			r.ModelKnobs.set(key, d.knobValue(key, v))
		}
	})
}

func (d *decoder) workload(n *yaml.Node, r *rawStudy) {
	d.mapping(n, "workload", workloadKeys, func(key string, k, v *yaml.Node) {
		f := "workload." + key
		switch key {
		case "gpus":
			if n := deref(v); n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.EqualFold(n.Value, "all") {
				r.GPUs = val[int]{V: gpusAll, Pos: d.pos(v), Set: true}
			} else if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
				d.ps.add(d.pos(v), "%s: expected a number of GPUs (0..1024) or all, got %q", f, n.Value)
				r.GPUs = val[int]{Pos: d.pos(v), Set: true, Bad: true}
			} else {
				r.GPUs = d.integer(v, f, 0, 1024)
			}
		case "nodes":
			r.Nodes = d.integer(v, f, 1, 4096)
		case "ranks":
			r.Ranks = d.integer(v, f, 1, 1024)
		case "procs_per_gpu":
			r.ProcsPerGPU = d.knobValue("procs_per_gpu", v)
		case "device":
			r.Device = d.str(v, f)
			if !r.Device.Bad && !contains([]string{"auto", "cuda", "cpu"}, r.Device.V) {
				d.ps.add(r.Device.Pos, "%s: %q is not one of auto | cuda | cpu%s", f, r.Device.V,
					didYouMean(knobs.Closest(r.Device.V, []string{"auto", "cuda", "cpu"})))
				r.Device.Bad = true
			}
		case "warmup_steps":
			r.Warmup = d.integer(v, f, 0, 100000)
		case "steps":
			r.Steps = d.integer(v, f, 1, 1000000)
		case "warmup_seconds":
			r.WarmupSec = d.seconds(v, f)
		case "measure_seconds":
			r.MeasureSec = d.seconds(v, f)
		case "repeats":
			if n := deref(v); n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.EqualFold(n.Value, "auto") {
				r.Repeats = val[int]{V: 0, Pos: d.pos(v), Set: true}
			} else if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
				d.ps.add(d.pos(v), "%s: expected a number of launches (1..100) or auto, got %q", f, n.Value)
				r.Repeats = val[int]{Pos: d.pos(v), Set: true, Bad: true}
			} else {
				r.Repeats = d.integer(v, f, 1, 100)
			}
		case "min_repeats":
			r.MinRepeats = d.integer(v, f, 2, 1000)
		case "max_repeats":
			r.MaxRepeats = d.integer(v, f, 2, 1000)
		case "max_time":
			r.MaxTime = d.duration(v, f)
		case "timeout":
			r.Timeout = d.duration(v, f)
		case "seed":
			i := d.integer(v, f, 0, math.MaxInt32)
			r.Seed = val[int64]{V: int64(i.V), Pos: i.Pos, Set: true, Bad: i.Bad}
		case "threads":
			r.Threads = d.integer(v, f, 0, 1024)
		case "interleave":
			r.Interleave = d.boolean(v, f)
		case "rehearse":
			r.Rehearse = d.boolean(v, f)
		case "world_of_one":
			r.WorldOfOne = d.boolean(v, f)
		}
	})
}

func (d *decoder) checklist(n *yaml.Node, r *rawStudy) {
	if r.ChecklistPos == nil {
		r.ChecklistPos = map[string]Pos{}
	}
	d.mapping(n, "checklist", checklistKeys, func(key string, _, v *yaml.Node) {
		if key == "disable" {
			r.Disable = d.strings(v, "checklist.disable")
			if seq := deref(v); seq.Kind == yaml.SequenceNode {
				for _, c := range seq.Content {
					r.ChecklistPos[checklistKey(deref(c).Value, "", true)] = d.pos(c)
				}
			}
			return
		}
		r.Thresholds = map[string]map[string]val[float64]{}
		d.mapping(v, "checklist.thresholds", nil, func(rule string, k, v *yaml.Node) {
			m := map[string]val[float64]{}
			r.Thresholds[rule] = m
			r.ChecklistPos[checklistKey(rule, "", false)] = d.pos(k)
			d.mapping(v, "checklist.thresholds."+rule, nil, func(name string, k, v *yaml.Node) {
				m[name] = d.number(v, fmt.Sprintf("checklist.thresholds.%s.%s", rule, name))
				r.ChecklistPos[checklistKey(rule, name, false)] = d.pos(k)
			})
		})
	})
}

func (d *decoder) sweep(n *yaml.Node) *rawSweep {
	s := &rawSweep{Pos: d.pos(n)}
	d.mapping(n, "sweep", nil, func(key string, k, v *yaml.Node) {
		switch key {
		case "strategy":
			s.Strategy = d.str(v, "sweep.strategy")
			if !s.Strategy.Bad && !contains(Strategies, s.Strategy.V) {
				d.ps.add(s.Strategy.Pos, "sweep.strategy: %q is not one of grid | one-at-a-time | list | greedy%s",
					s.Strategy.V, didYouMean(knobs.Closest(s.Strategy.V, Strategies)))
				s.Strategy.Bad = true
			}
		case "knobs":
			s.KnobsSet = true
			d.mapping(v, "sweep.knobs", nil, func(name string, k, v *yaml.Node) {
				if !d.knobKey(k, "sweep") {
					return
				}
				s.Knobs = append(s.Knobs, d.axis(name, k, v))
			})
		case "trials":
			s.TrialsSet = true
			s.Trials = d.points(v, "sweep.trials")
		case "exclude":
			s.Exclude = d.points(v, "sweep.exclude")
		case "constraints":
			cs := d.strings(v, "sweep.constraints")
			seq := deref(v)
			for i, src := range cs.V {
				pos := cs.Pos
				if i < len(seq.Content) {
					pos = d.pos(seq.Content[i])
				}
				e, err := ParseExpr(src)
				if err != nil {
					d.ps.add(pos, "constraint %q: %v", src, err)
					continue
				}
				s.Constraints = append(s.Constraints, rawConstraint{Src: src, Pos: pos, Expr: e})
			}
		case "max_trials":
			s.MaxTrials = d.integer(v, "sweep.max_trials", 1, MaxTrialsCeiling)
		case "allow_nvls":
			s.AllowNVLS = d.boolean(v, "sweep.allow_nvls")
		case "allow_tp_across_nodes":
			s.AllowTPAcrossNodes = d.boolean(v, "sweep.allow_tp_across_nodes")
		default:
			hint := didYouMean(knobs.Closest(key, sweepKeys))
			if hint == "" {
				if kn := knobs.Suggest(key); kn != "" {
					hint = fmt.Sprintf(" (did you mean %q under sweep.knobs?)", kn)
				}
			}
			if _, isKnob := knobs.Lookup(key); isKnob {
				hint = " (knobs to sweep go under sweep.knobs)"
			}
			d.ps.add(d.pos(k), "unknown key %q in sweep%s", key, hint)
		}
	})
	return s
}

// axis reads the list of values of one swept knob.
func (d *decoder) axis(name string, k, v *yaml.Node) rawAxis {
	a := rawAxis{Name: name, Pos: d.pos(k)}
	seq := deref(v)
	if seq.Kind != yaml.SequenceNode {
		d.ps.add(d.pos(v), "sweep.knobs.%s: expected a list of values, e.g. [%s], got %s", name, exampleValues(name), kindName(seq))
		return a
	}
	if len(seq.Content) == 0 {
		d.ps.add(d.pos(v), "sweep.knobs.%s: the list of values is empty", name)
	}
	seen := map[string]bool{}
	for _, c := range seq.Content {
		kv := d.knobValue(name, c)
		if kv.Bad {
			continue
		}
		if seen[kv.V] {
			d.ps.add(kv.Pos, "sweep.knobs.%s: value %s is listed twice", name, kv.V)
			continue
		}
		seen[kv.V] = true
		a.Values = append(a.Values, kv)
	}
	return a
}

func exampleValues(name string) string {
	k, _ := knobs.Lookup(name)
	switch {
	case k.Type == knobs.Enum && len(k.Values) >= 2:
		return k.Values[0] + ", " + k.Values[1]
	case k.Type == knobs.Bool:
		return "false, true"
	}
	return k.Default + ", ..."
}

// points reads a list of knob mappings (sweep.trials, sweep.exclude).
func (d *decoder) points(n *yaml.Node, where string) []*point {
	seq := deref(n)
	if seq.Kind != yaml.SequenceNode {
		d.ps.add(d.pos(n), "%s: expected a list of knob mappings, got %s", where, kindName(seq))
		return nil
	}
	var out []*point
	for i, c := range seq.Content {
		p := d.knobPoint(c, fmt.Sprintf("%s[%d]", where, i))
		if len(p.Values) == 0 {
			d.ps.add(d.pos(c), "%s[%d] is empty", where, i)
		}
		out = append(out, p)
	}
	return out
}
