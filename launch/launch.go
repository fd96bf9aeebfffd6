// Package launch starts a trial's rank processes and ends them. The Launcher
// interface hides where they run: Local starts them on this machine; a Slurm
// launcher places them through the scheduler.
package launch

import (
	"context"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Rank is one process of a trial.
type Rank struct {
	Rank int
	Env  []string  // the complete environment (see BuildEnv)
	Log  io.Writer // stdout and stderr; an *os.File is handed to the process directly
	GPU  string    // CUDA_VISIBLE_DEVICES entry, "" on CPU (informational)
}

// Spec is what to start: the same program for every rank.
type Spec struct {
	Trial string   // for messages
	Path  string   // the executable (casestudy itself)
	Args  []string // e.g. ["worker"]
	Dir   string   // working directory; "" inherits
	Ranks []Rank

	// For schedulers (Slurm): where and how long the ranks may run.
	Nodes       int           // nodes the ranks spread over evenly; 0: 1
	ProcsPerGPU int           // ranks sharing one GPU; 0: 1
	Timeout     time.Duration // the trial's wall-clock limit; 0: none
}

// Exit is how one rank ended.
type Exit struct {
	Rank   int
	Code   int    // exit status; -1 when killed by a signal
	Signal string // e.g. "SIGKILL", "" when it exited
	At     time.Time
	Err    error // a wait error that is neither an exit status nor a signal

	// What a scheduler saw (Slurm): the node the rank ran on, and its verdict
	// when it ended the rank itself: Outcome "timeout" (time limit), "oom" or
	// "failed" (node failure, preemption), with Reason in its words.
	Node    string
	Outcome string
	Reason  string
}

// Killed reports whether the rank ended by a signal.
func (e Exit) Killed() bool { return e.Signal != "" }

// Group is a started trial.
type Group interface {
	// Exits delivers one Exit per rank as each ends, then closes.
	Exits() <-chan Exit
	// Kill ends every rank still running: SIGTERM to each rank's process
	// group, then SIGKILL after grace. It returns at once and is idempotent.
	Kill(grace time.Duration)
}

// Launcher starts trials.
type Launcher interface {
	Start(ctx context.Context, spec Spec) (Group, error)
}

// Deadliner is a launcher whose scheduler enforces Spec.Timeout itself; the
// runner's own deadline then waits Deadline(timeout) so the scheduler's
// verdict comes first.
type Deadliner interface {
	Deadline(timeout time.Duration) time.Duration
}

// DeadlineFor is when the runner stops a launch of l itself: timeout, or the
// later backstop of a launcher whose scheduler enforces the limit.
func DeadlineFor(l Launcher, timeout time.Duration) time.Duration {
	if d, ok := l.(Deadliner); ok && timeout > 0 {
		return d.Deadline(timeout)
	}
	return timeout
}

// BuildEnv is a rank's environment: parent minus every variable in unset and
// every variable in set, then set (sorted). "default" knobs land in unset, so
// a value the parent shell had does not leak into the trial; "auto" knobs are
// in neither, and the parent's value stands (knobs.Environment).
func BuildEnv(parent []string, set map[string]string, unset []string) []string {
	drop := map[string]bool{}
	for _, k := range unset {
		drop[k] = true
	}
	for k := range set {
		drop[k] = true
	}
	out := make([]string, 0, len(parent)+len(set))
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+set[k])
	}
	return out
}

// GPUFor maps a rank to a device: rank r uses visible[r / procsPerGPU]. It
// returns "" when visible has no entry for it.
func GPUFor(rank, procsPerGPU int, visible []string) string {
	if procsPerGPU < 1 {
		procsPerGPU = 1
	}
	i := rank / procsPerGPU
	if i >= len(visible) {
		return ""
	}
	return visible[i]
}

// VisibleGPUs is the parent's device list: CUDA_VISIBLE_DEVICES split on commas
// when set, else "0".."count-1".
func VisibleGPUs(env []string, count int) []string {
	if v, ok := LookupEnv(env, "CUDA_VISIBLE_DEVICES"); ok {
		var out []string
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				out = append(out, d)
			}
		}
		return out
	}
	out := make([]string, count)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}
