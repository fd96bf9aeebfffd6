// Package knobs is the registry of everything a study can set or sweep: NCCL and
// CUDA environment variables, engine settings (precision, CUDA Graphs, DDP
// buckets, pipeline schedule, ...) and launcher settings (MPS, processes per
// GPU). Each knob has a type, a domain, a default, the way it is applied, a doc
// paragraph and the course chapter that explains it (internal/course,
// docs/course.md). docs/knobs.md is generated from it.
package knobs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Type is the kind of value a knob takes.
type Type string

const (
	Enum   Type = "enum"   // one of Values
	Int    Type = "int"    // integer within [Min, Max]
	Float  Type = "float"  // number within [Min, Max]
	Bool   Type = "bool"   // true | false
	Size   Type = "size"   // bytes: 4194304, 4MiB, 512KiB, 1G
	String Type = "string" // free text (interface names, HCA lists)
)

// Apply says how a trial's value of a knob reaches the training.
type Apply string

const (
	Env      Apply = "env"      // an environment variable of every rank (EnvVar)
	Engine   Apply = "engine"   // a field of the engine config (engine.Config)
	Launcher Apply = "launcher" // a setting of the runner/launcher (MPS, processes per GPU)
)

// Auto is the value that leaves a setting to what the trial finds: an Env
// knob's variable is inherited from the runner's environment (a cluster's own
// NCCL_IB_HCA or NCCL_SOCKET_IFNAME stands), and the library chooses when the
// environment has none.
const Auto = "auto"

// Default is the value of an Env knob that unsets its variable for the trial,
// even when the runner's environment set it: the library's own default.
const Default = "default"

// Unforced reports whether v leaves an Env knob's setting to the environment
// or the library (auto, default, or no value).
func Unforced(v string) bool { return v == "" || v == Auto || v == Default }

// Off is the canonical value of an OffOK knob that is switched off.
const Off = "off"

// DefaultOK says whether the knob accepts Default: Env knobs that accept auto.
func (k *Knob) DefaultOK() bool { return k.Apply == Env && (k.AutoOK || k.inValues(Auto)) }

// Knob is one registry entry.
type Knob struct {
	Name    string   // dotted and flat: nccl.algo, ddp.bucket_mb, precision
	Type    Type     // enum | int | float | bool | size | string
	Values  []string // enum domain in canonical spelling (auto included where accepted)
	Min     string   // int/float/size lower bound ("" = none)
	Max     string   // int/float/size upper bound ("" = none)
	Default string   // canonical default value
	Apply   Apply    // env | engine | launcher
	EnvVar  string   // the variable of an Env knob (also set by some launcher knobs)
	Doc     string   // one paragraph
	Chapter int      // the course chapter that explains it (internal/course, docs/course.md)
	Hidden  bool     // test-only knob (fault injection); not listed by default

	AutoOK bool // "auto" is accepted besides the domain (int/float/size/string knobs)
	OffOK  bool // "off" (also false, no, 0) is accepted besides the range (int knobs)
	// Observe marks a knob that changes what a launch records, not what it
	// measures (profile): it is left out of trial IDs and may not be swept.
	Observe    bool
	Families   []string // model families it applies to; nil = all
	Constraint string   // what the planner checks (docs only; rules.go enforces)

	// parse, when set, canonicalises a value itself (after auto handling).
	parse func(raw string) (string, error)
}

// All returns every knob, hidden ones included, sorted by name.
func All() []*Knob { return registry }

// Visible returns the knobs a user sees (no test-only knobs), sorted by name.
func Visible() []*Knob {
	var out []*Knob
	for _, k := range registry {
		if !k.Hidden {
			out = append(out, k)
		}
	}
	return out
}

// Lookup finds a knob by its exact name.
func Lookup(name string) (*Knob, bool) {
	k, ok := byName[name]
	return k, ok
}

// Names returns every knob name (hidden included), sorted.
func Names() []string {
	out := make([]string, len(registry))
	for i, k := range registry {
		out[i] = k.Name
	}
	return out
}

// AppliesTo reports whether the knob is meaningful for a model family.
func (k *Knob) AppliesTo(family string) bool {
	if len(k.Families) == 0 || family == "" {
		return true
	}
	for _, f := range k.Families {
		if f == family {
			return true
		}
	}
	return false
}

// Domain describes the accepted values in words, for errors and docs.
func (k *Knob) Domain() string {
	var d string
	switch k.Type {
	case Enum:
		d = strings.Join(k.Values, " | ")
		if k.Name == "ddp.compression" {
			d += " | topk:RATIO"
		}
	case Bool:
		d = "true | false"
	case Int, Float, Size:
		unit := map[Type]string{Int: "integer", Float: "number", Size: "bytes (4194304, 4MiB, 512KiB)"}[k.Type]
		switch {
		case k.Min != "" && k.Max != "":
			d = fmt.Sprintf("%s %s..%s", unit, k.Min, k.Max)
		case k.Min != "":
			d = fmt.Sprintf("%s >= %s", unit, k.Min)
		case k.Max != "":
			d = fmt.Sprintf("%s <= %s", unit, k.Max)
		default:
			d = unit
		}
	case String:
		d = "text"
	}
	if k.AutoOK && k.Type != Enum {
		d += " | auto"
	}
	if k.DefaultOK() {
		d += " | " + Default
	}
	if k.OffOK {
		d = Off + " | " + d
	}
	return d
}

// Suggest returns the registered knob name closest to name, or "" when
// nothing is close enough to be a likely typo.
func Suggest(name string) string {
	return Closest(name, Names())
}

// Closest returns the candidate closest to s by edit distance (Levenshtein,
// github.com/agnivade/levenshtein; case-insensitive,
// also matching on the last dotted part), or "" when none is close.
func Closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := levenshtein.ComputeDistance(ls, lc)
		// "bucket_mbs" should find "ddp.bucket_mb": compare with the last part too.
		if i := strings.LastIndexByte(lc, '.'); i >= 0 && !strings.Contains(ls, ".") {
			if d2 := levenshtein.ComputeDistance(ls, lc[i+1:]); d2 < d {
				d = d2
			}
		}
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := len(s) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD > limit {
		return ""
	}
	return best
}

var (
	registry []*Knob
	byName   map[string]*Knob
)

func init() {
	registry = knobList()
	sort.Slice(registry, func(i, j int) bool { return registry[i].Name < registry[j].Name })
	byName = make(map[string]*Knob, len(registry))
	for _, k := range registry {
		if _, dup := byName[k.Name]; dup {
			panic("knobs: duplicate knob " + k.Name)
		}
		byName[k.Name] = k
	}
}
