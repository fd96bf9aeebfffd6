package runner

import (
	"fmt"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/study"
)

// Inheritance of the runner's environment (knobs.Auto): an env knob left auto
// sets nothing, so a variable the environment exports (a cluster's
// NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_NET_GDR_LEVEL) reaches the ranks;
// knobs.Default unsets it. The manifest records what the trials inherit and
// the run warns about each auto knob whose variable the environment sets.

// inheritedPrefixes name the variables whose inheritance is recorded.
var inheritedPrefixes = []string{"NCCL_", "CUDA_"}

// InheritedEnv is the environment's NCCL_* and CUDA_* variables that reach
// the ranks of at least one planned trial unchanged: no knob of that trial
// sets or unsets them. CUDA_VISIBLE_DEVICES is left out: the runner gives each
// rank its own. nil when nothing is inherited.
func InheritedEnv(env []string, plan *study.Plan) map[string]string {
	var out map[string]string
	for _, t := range plan.Trials {
		set, unset := knobs.Environment(t.Knobs)
		gone := map[string]bool{}
		for _, k := range unset {
			gone[k] = true
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			if k == "CUDA_VISIBLE_DEVICES" || gone[k] || !hasAnyPrefix(k, inheritedPrefixes) {
				continue
			}
			if _, ok := set[k]; ok {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v // the last entry wins, as in a started process
		}
	}
	return out
}

// InheritWarnings are the lines a run prints for each env knob that is auto
// in some planned trial while the environment sets its variable: those
// trials run with the environment's value, not the library's choice. A knob
// the study sweeps says so: its auto trials measure that value.
func InheritWarnings(env []string, plan *study.Plan) []string {
	var out []string
	for _, k := range knobs.All() {
		if k.Apply != knobs.Env || !k.DefaultOK() {
			continue
		}
		v, ok := launch.LookupEnv(env, k.EnvVar)
		if !ok {
			continue
		}
		auto, swept := 0, false
		for _, t := range plan.Trials {
			val, has := t.Knobs[k.Name]
			if !has {
				val = k.Default
			}
			if val == knobs.Auto || val == "" {
				auto++
			}
			for _, c := range t.Changed {
				swept = swept || c == k.Name
			}
		}
		if auto == 0 {
			continue
		}
		line := fmt.Sprintf("%s is auto in %d of %d trials: they inherit %s=%s from this environment (%s: default unsets it)",
			k.Name, auto, len(plan.Trials), k.EnvVar, v, k.Name)
		if swept {
			line += "; the study sweeps " + k.Name + ", and its auto trials measure this value, not the library's own choice"
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
