package main

import (
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// addOverrideFlags adds run's workload overrides (study.OverrideFlags).
func addOverrideFlags(f *pflag.FlagSet) {
	f.String("repeats", "", "launches per trial, `N` or auto (overrides workload.repeats)")
	f.String("max-time", "", "time budget for the run's launches, like 9m (overrides workload.max_time)")
	f.String("warmup", "", "warm-up steps per launch (overrides workload.warmup_steps)")
	f.String("steps", "", "measured steps per launch (overrides workload.steps)")
	f.String("gpus", "", "GPUs per node a trial uses (overrides workload.gpus)")
	f.String("ranks", "", "CPU ranks of a trial on device cpu (overrides workload.ranks)")
}

// overridesOf are the override flags given on the command line, by name.
// A resumed run applies the overrides its manifest recorded: flags that
// contradict them are refused, since the run would mix two settings.
func overridesOf(cmd *cobra.Command, prev *store.Run) (map[string]string, error) {
	given := map[string]string{}
	for _, name := range study.OverrideFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			given[name] = f.Value.String()
		}
	}
	if prev == nil {
		return given, nil
	}
	recorded := prev.Manifest.Overrides
	for name, v := range given {
		if recorded[name] != v {
			return nil, exitcode.Usage(fmt.Errorf("--%s %s: %s was started with %s; --resume applies the run's own settings (leave the flag out)",
				name, v, prev.Dir, recordedText(recorded)))
		}
	}
	return maps.Clone(recorded), nil
}

// overrideFlagArgs are the overrides as flags of a printed command,
// --name=value in study.OverrideFlags order.
func overrideFlagArgs(o map[string]string) []string {
	var out []string
	for _, name := range study.OverrideFlags {
		if v, ok := o[name]; ok {
			out = append(out, "--"+name+"="+v)
		}
	}
	return out
}

func recordedText(o map[string]string) string {
	if len(o) == 0 {
		return "no overrides"
	}
	return strings.Join(study.OverrideArgs(o), " ")
}
