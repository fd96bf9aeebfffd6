package study

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/casestudy/casestudy/internal/exitcode"
)

// OverrideFlags are the workload settings `casestudy run` can override from
// the command line, by flag name (without --).
var OverrideFlags = []string{"repeats", "max-time", "warmup", "steps", "gpus", "ranks"}

// ApplyOverrides changes s's workload as the command line asks: flag name
// (OverrideFlags) -> value as given. The run's manifest records the map, and
// --resume applies it again. A value outside its range, or a setting the
// study's device does not have (--gpus on cpu, --ranks on cuda), is a usage
// error naming the flag.
func ApplyOverrides(s *Study, o map[string]string) error {
	w := &s.Workload
	for _, name := range OverrideFlags { // a fixed order: gpus before the ranks it implies
		v, ok := o[name]
		if !ok {
			continue
		}
		bad := func(format string, args ...any) error {
			return exitcode.Usage(fmt.Errorf("--%s %s: %s", name, v, fmt.Sprintf(format, args...)))
		}
		intIn := func(lo, hi int) (int, error) {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < lo || n > hi {
				return 0, bad("give an integer in %d..%d", lo, hi)
			}
			return n, nil
		}
		switch name {
		case "repeats":
			if strings.EqualFold(strings.TrimSpace(v), "auto") {
				w.Repeats, w.Interleave = 0, true
				continue
			}
			n, err := intIn(1, 100)
			if err != nil {
				return bad("give a number of launches per trial (1..100) or auto")
			}
			w.Repeats = n
		case "max-time":
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < time.Second || d > 48*time.Hour {
				return bad("give a duration in 1s..48h, like 9m or 1h30m")
			}
			w.MaxTime = d
		case "warmup":
			n, err := intIn(0, 100000)
			if err != nil {
				return err
			}
			w.WarmupSteps = n
		case "steps":
			n, err := intIn(1, 1000000)
			if err != nil {
				return err
			}
			w.Steps = n
		case "gpus":
			if w.Device == "cpu" {
				return bad("the study runs on the CPU (workload.device: cpu); CPU ranks are workload.ranks in the study (run also takes --ranks)")
			}
			n, err := intIn(1, 1024)
			if err != nil {
				return err
			}
			s.SetGPUs(n)
			w.GPUsAll = false
		case "ranks":
			if w.Device == "cuda" {
				return bad("ranks on cuda are gpus x nodes x procs_per_gpu; set --gpus instead")
			}
			n, err := intIn(1, 1024)
			if err != nil {
				return err
			}
			w.Ranks = n
		}
	}
	for name := range o {
		if !slices.Contains(OverrideFlags, name) {
			return exitcode.Usage(fmt.Errorf("unknown override %q (known: %s)", name, strings.Join(OverrideFlags, ", ")))
		}
	}
	return nil
}

// OverrideArgs are the overrides as command-line flags, in a fixed order,
// for the commands the tool prints (re-run a trial).
func OverrideArgs(o map[string]string) []string {
	var out []string
	for _, name := range OverrideFlags {
		if v, ok := o[name]; ok {
			out = append(out, "--"+name, v)
		}
	}
	return out
}
