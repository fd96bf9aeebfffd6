package study

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/casestudy/casestudy/knobs"
)

// val is a decoded field with where it came from. Set: the file has the key;
// Bad: it has the key but the value was refused (already reported).
type val[T any] struct {
	V   T
	Pos Pos
	Set bool
	Bad bool
}

// point is a mapping of knob -> canonical value (baseline, a list trial, an
// exclude entry), in file order.
type point struct {
	Pos    Pos
	Order  []string
	Values map[string]val[string]
}

func newPoint(pos Pos) *point { return &point{Pos: pos, Values: map[string]val[string]{}} }

func (p *point) set(name string, v val[string]) {
	if _, ok := p.Values[name]; !ok {
		p.Order = append(p.Order, name)
	}
	p.Values[name] = v
}

func (p *point) plain() map[string]string {
	out := make(map[string]string, len(p.Values))
	for k, v := range p.Values {
		if !v.Bad {
			out[k] = v.V
		}
	}
	return out
}

// rawStudy is one file as written, before extends are merged.
type rawStudy struct {
	File                   string
	Name, Description, Ext val[string]
	Family, Preset         val[string]
	Layers, Hidden         val[int]
	ModelKnobs             *point // micro_batch, seq_len, image_size
	GPUs, Nodes, Ranks     val[int]
	Warmup, Steps, Repeats val[int] // Repeats.V 0: auto
	WarmupSec, MeasureSec  val[float64]
	MinRepeats, MaxRepeats val[int]
	MaxTime                val[time.Duration]
	Threads                val[int]
	Device                 val[string]
	Timeout                val[time.Duration]
	Seed                   val[int64]
	Interleave             val[bool]
	Rehearse               val[bool]
	WorldOfOne             val[bool]
	ProcsPerGPU            val[string]
	Baseline               *point
	Sweep                  *rawSweep
	Metric, Goal           val[string]
	Disable                val[[]string]
	Thresholds             map[string]map[string]val[float64]
	ChecklistPos           map[string]Pos // where each checklist entry is written (checklistKey)
	Formats                val[[]string]
	CompareBase            val[string]
	Threshold              val[float64]
	Launcher               map[string]val[string]
	sectionPos             map[string]Pos
}

type rawSweep struct {
	Pos         Pos
	Strategy    val[string]
	Knobs       []rawAxis
	KnobsSet    bool
	Trials      []*point
	TrialsSet   bool
	Exclude     []*point
	Constraints []rawConstraint
	MaxTrials   val[int]
	AllowNVLS   val[bool]
	// AllowTPAcrossNodes plans tensor groups that span nodes (knobs.Check).
	AllowTPAcrossNodes val[bool]
}

type rawAxis struct {
	Name   string
	Pos    Pos
	Values []val[string]
}

type rawConstraint struct {
	Src  string
	Pos  Pos
	Expr *Expr
}

// Keys of each section; unknown keys are errors with a suggestion.
var (
	topKeys       = []string{"name", "description", "extends", "model", "workload", "baseline", "sweep", "objective", "checklist", "report", "compare", "launcher"}
	modelKeys     = []string{"family", "preset", "layers", "hidden", "micro_batch", "seq_len", "image_size"}
	workloadKeys  = []string{"gpus", "nodes", "ranks", "procs_per_gpu", "device", "warmup_steps", "steps", "warmup_seconds", "measure_seconds", "repeats", "min_repeats", "max_repeats", "max_time", "timeout", "seed", "threads", "interleave", "rehearse", "world_of_one"}
	sweepKeys     = []string{"strategy", "knobs", "trials", "exclude", "constraints", "max_trials", "allow_nvls", "allow_tp_across_nodes"}
	objectiveKeys = []string{"metric", "goal"}
	checklistKeys = []string{"disable", "thresholds"}
	reportKeys    = []string{"formats"}
	compareKeys   = []string{"baseline", "threshold"}
	// LauncherKeys are the settings a study's launcher section may carry
	// (launch/ reads them); extend this list when a launcher learns a new one.
	LauncherKeys = []string{"kind", "partition", "account", "qos", "reservation", "constraint", "time_limit", "extra_args", "srun_args", "rdzv_interface"}
)

// decoder walks one file's node tree, reporting every problem it finds.
type decoder struct {
	file string
	ps   *problems
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

// mapping calls fn for each key of n (a mapping), refusing duplicate keys and,
// when keys is not nil, keys outside it (with the closest valid key).
func (d *decoder) mapping(n *yaml.Node, where string, keys []string, fn func(key string, k, v *yaml.Node)) bool {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return false // an empty section: nothing to read
		}
		d.ps.add(d.pos(n), "%s must be a mapping of keys, got %s", where, kindName(n))
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.ps.add(d.pos(k), "a key in %s must be a plain name, got %s", where, kindName(k))
			continue
		}
		key := k.Value
		if k.Tag == "!!merge" {
			d.ps.add(d.pos(k), "merge keys (<<) are not supported in %s; write the keys out", where)
			continue
		}
		if seen[key] {
			d.ps.add(d.pos(k), "duplicate key %q in %s", key, where)
			continue
		}
		seen[key] = true
		if keys != nil && !contains(keys, key) {
			d.ps.add(d.pos(k), "unknown key %q in %s%s", key, where, unknownHint(key, where, keys))
			continue
		}
		fn(key, k, v)
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scalar returns the text of a scalar node, reporting anything else.
func (d *decoder) scalar(n *yaml.Node, field string) (string, bool) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.ps.add(d.pos(n), "%s: expected a single value, got %s", field, kindName(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, field string) val[string] {
	s, ok := d.scalar(n, field)
	if ok && deref(n).Tag != "!!str" {
		d.ps.add(d.pos(n), "%s: expected text, got %s (quote it if you mean the text)", field, kindName(deref(n)))
		ok = false
	}
	return val[string]{V: s, Pos: d.pos(n), Set: true, Bad: !ok}
}

// decimalDigits is an integer as written, however long; nonFinite is YAML's
// spelling of NaN and the infinities (.nan, .inf, -.Inf, ...).
var (
	decimalDigits = regexp.MustCompile(`^[-+]?[0-9]+$`)
	nonFinite     = regexp.MustCompile(`^[-+]?\.(?i:nan|inf)$`)
)

func (d *decoder) integer(n *yaml.Node, field string, min, max int) val[int] {
	s, ok := d.scalar(n, field)
	v := val[int]{Pos: d.pos(n), Set: true, Bad: true}
	if !ok {
		return v
	}
	i, err := strconv.Atoi(s)
	switch {
	case (err != nil || deref(n).Tag != "!!int") && decimalDigits.MatchString(s):
		// too long for an integer: YAML reads 99999999999999999999 as a float
		d.ps.add(d.pos(n), "%s: %s is out of range: expected an integer in %d..%d", field, s, min, max)
	case err != nil || deref(n).Tag != "!!int":
		d.ps.add(d.pos(n), "%s: expected an integer, got %s", field, kindName(deref(n)))
	case i < min || i > max:
		d.ps.add(d.pos(n), "%s: %d is outside %d..%d", field, i, min, max)
	default:
		v.V, v.Bad = i, false
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node, field string) val[bool] {
	s, ok := d.scalar(n, field)
	v := val[bool]{Pos: d.pos(n), Set: true, Bad: true}
	if !ok {
		return v
	}
	switch {
	case deref(n).Tag == "!!bool" && (s == "true" || s == "True" || s == "TRUE"):
		v.V, v.Bad = true, false
	case deref(n).Tag == "!!bool":
		v.V, v.Bad = false, false
	default:
		d.ps.add(d.pos(n), "%s: expected true or false, got %s", field, kindName(deref(n)))
	}
	return v
}

func (d *decoder) number(n *yaml.Node, field string) val[float64] {
	s, ok := d.scalar(n, field)
	v := val[float64]{Pos: d.pos(n), Set: true, Bad: true}
	if !ok {
		return v
	}
	f, err := strconv.ParseFloat(s, 64)
	t := deref(n).Tag
	if errors.Is(err, strconv.ErrRange) && !math.IsInf(f, 0) {
		err = nil // too small to hold: it reads as 0, as YAML reads it
	}
	if errors.Is(err, strconv.ErrRange) || (t == "!!int" || t == "!!float") && (nonFinite.MatchString(s) || err == nil && (math.IsNaN(f) || math.IsInf(f, 0))) {
		// YAML reads 1e999 as text: say what is wrong with it
		d.ps.add(d.pos(n), "%s: %s is not a finite number: NaN and infinity are not allowed (write a plain number such as 0.05)", field, s)
		return v
	}
	if t != "!!int" && t != "!!float" {
		d.ps.add(d.pos(n), "%s: expected a number, got %s", field, kindName(deref(n)))
		return v
	}
	if err != nil {
		d.ps.add(d.pos(n), "%s: %q is not a number (write a plain number such as 0.05)", field, s)
		return v
	}
	v.V, v.Bad = f, false
	return v
}

func (d *decoder) strings(n *yaml.Node, field string) val[[]string] {
	v := val[[]string]{Pos: d.pos(n), Set: true}
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		d.ps.add(d.pos(n), "%s: expected a list, got %s", field, kindName(n))
		v.Bad = true
		return v
	}
	for _, c := range n.Content {
		s := d.str(c, field)
		if s.Bad {
			v.Bad = true
			continue
		}
		v.V = append(v.V, s.V)
	}
	return v
}

// knobValue canonicalises one knob value, reporting an unknown knob or a
// value outside its domain.
func (d *decoder) knobValue(name string, n *yaml.Node) val[string] {
	v := val[string]{Pos: d.pos(n), Set: true, Bad: true}
	s, ok := d.scalar(n, name)
	if !ok {
		return v
	}
	k, known := knobs.Lookup(name)
	if !known {
		return v // the key was reported already
	}
	c, err := k.Canonical(s)
	if err != nil {
		d.ps.add(d.pos(n), "%v", err)
		return v
	}
	v.V, v.Bad = c, false
	return v
}

// knobKey checks a knob name used as a key, with a suggestion.
func (d *decoder) knobKey(k *yaml.Node, where string) bool {
	if _, ok := knobs.Lookup(k.Value); ok {
		return true
	}
	hint := didYouMean(knobs.Suggest(k.Value))
	switch {
	case hint != "":
	case contains(workloadKeys, k.Value):
		hint = fmt.Sprintf(" (%s is a workload setting: put it under workload)", k.Value)
	case contains(modelKeys, k.Value):
		hint = fmt.Sprintf(" (%s is a model setting: put it under model)", k.Value)
	}
	d.ps.add(d.pos(k), "unknown key %q in %s%s", k.Value, where, hint)
	return false
}

// unknownHint suggests the closest valid key, or where a misplaced key belongs.
func unknownHint(key, where string, keys []string) string {
	if c := knobs.Closest(key, keys); c != "" {
		return didYouMean(c)
	}
	if _, isKnob := knobs.Lookup(key); isKnob {
		return fmt.Sprintf(" (%s is a knob: set it under baseline or sweep it under sweep.knobs)", key)
	}
	for _, sec := range []struct {
		name string
		keys []string
	}{{"workload", workloadKeys}, {"model", modelKeys}, {"sweep", sweepKeys}} {
		if sec.name != where && contains(sec.keys, key) {
			return fmt.Sprintf(" (%s belongs under %s)", key, sec.name)
		}
	}
	return ""
}

// knobPoint reads a mapping of knob -> value.
func (d *decoder) knobPoint(n *yaml.Node, where string) *point {
	p := newPoint(d.pos(n))
	d.mapping(n, where, nil, func(key string, k, v *yaml.Node) {
		if d.knobKey(k, where) {
			p.set(key, d.knobValue(key, v))
		}
	})
	return p
}

// duration reads a Go duration ("10m", "90s"); a bare integer is refused so
// that "timeout: 10" is not silently ten nanoseconds or ten seconds.
func (d *decoder) duration(n *yaml.Node, field string) val[time.Duration] {
	v := val[time.Duration]{Pos: d.pos(n), Set: true, Bad: true}
	s, ok := d.scalar(n, field)
	if !ok {
		return v
	}
	t, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.ps.add(d.pos(n), "%s: %q is not a duration (write e.g. 10m, 90s, 1h30m)", field, s)
	case t < time.Second || t > 48*time.Hour:
		d.ps.add(d.pos(n), "%s: %s is outside 1s..48h", field, t)
	default:
		v.V, v.Bad = t, false
	}
	return v
}

// percent reads a threshold as "5%" or a fraction 0.05.
func (d *decoder) percent(n *yaml.Node, field string) val[float64] {
	v := val[float64]{Pos: d.pos(n), Set: true, Bad: true}
	s, ok := d.scalar(n, field)
	if !ok {
		return v
	}
	var f float64
	var err error
	if p, isPct := strings.CutSuffix(strings.TrimSpace(s), "%"); isPct {
		f, err = strconv.ParseFloat(strings.TrimSpace(p), 64)
		f /= 100
	} else {
		f, err = strconv.ParseFloat(s, 64)
		if err == nil && f > 1 {
			err = fmt.Errorf("%q reads as more than 100%%; write %s%% or %g", s, s, f/100)
		}
	}
	switch {
	case err != nil && strings.Contains(err.Error(), "reads as"):
		d.ps.add(d.pos(n), "%s: %v", field, err)
	case err != nil:
		d.ps.add(d.pos(n), "%s: %q is not a percentage (write 5%% or 0.05)", field, s)
	case !(f > 0 && f < 1): // as compare --threshold (report.ParseThreshold): at 100% a 2x slowdown would pass
		d.ps.add(d.pos(n), "%s: %s must be above 0%% and below 100%%", field, s)
	default:
		v.V, v.Bad = f, false
	}
	return v
}
