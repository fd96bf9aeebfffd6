package study

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"

	"github.com/casestudy/casestudy/knobs"
)

// Resolve returns every knob's value for a sweep point: registry defaults
// (knobs of the study's family, hidden test knobs left out), then the
// baseline, then the point.
func (s *Study) Resolve(point map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range knobs.All() {
		if !k.Hidden && k.AppliesTo(s.Model.Family) {
			out[k.Name] = k.Default
		}
	}
	for k, v := range s.Baseline {
		out[k] = v
	}
	for k, v := range point {
		out[k] = v
	}
	return out
}

// variable returns a constraint variable or a knob value of a resolved trial.
func (s *Study) variable(values map[string]string, name string) string {
	switch name {
	case "ranks":
		return strconv.Itoa(s.RanksFor(values))
	case "dp":
		return strconv.Itoa(s.DataParallelFor(values))
	case "gpus":
		return strconv.Itoa(s.Workload.GPUs)
	case "nodes":
		return strconv.Itoa(s.Workload.Nodes)
	case "device":
		return s.Workload.Device
	case "family":
		return s.Model.Family
	case "preset":
		return s.Model.Preset
	}
	if v, ok := values[name]; ok {
		return v
	}
	if k, ok := knobs.Lookup(name); ok {
		return k.Default
	}
	return ""
}

// TrialID is the stable ID of a trial: the first 8 hex digits of the sha256 of
// its knob values that differ from the registry defaults, sorted by name as
// "name=value" lines. It does not depend on sweep order, and adding a knob to
// the registry (with a default) does not change existing IDs. Observe knobs
// (profile) are left out: they change what is recorded, not what is measured.
func TrialID(values map[string]string) string {
	names := make([]string, 0, len(values))
	for name, v := range values {
		if k, ok := knobs.Lookup(name); ok && (v == k.Default || k.Observe) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s\n", n, values[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// changedFrom lists the knobs of values that differ from base, sorted.
func changedFrom(values, base map[string]string) []string {
	var out []string
	for k, v := range values {
		if base[k] != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// FormatKnobs writes knob values as "a=1 b=2" in the order of names (name
// order when nil).
func FormatKnobs(values map[string]string, names []string) string {
	return knobs.Join(values, names, " ")
}
