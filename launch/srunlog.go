package launch

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What srun says about a step, read from its --label --verbose output. srun
// reports every task's end on its own stderr ("srun: error: node1: task 1:
// Exited with exit code 3", "... tasks 0-1: Killed"; "Completed" at -v), the
// node of each task when it launches them, and slurmstepd writes a step's
// cancellation into the tasks' stderr ("*** STEP 5.1 ON node1 CANCELLED AT
// ... DUE TO TIME LIMIT ***").

// taskEnd is how srun said a task ended.
type taskEnd struct {
	code   int    // exit status; -1 with a signal
	signal string // e.g. "SIGKILL"
	oom    bool   // "Out Of Memory"
}

// stepReport collects what srun and slurmstepd said about one step.
type stepReport struct {
	stepID  string // e.g. "5.1"
	nodes   map[int]string
	ends    map[int]taskEnd
	outcome string // "timeout" | "oom" | "failed": Slurm's verdict on the step
	reason  string
}

func newStepReport() *stepReport {
	return &stepReport{nodes: map[int]string{}, ends: map[int]taskEnd{}}
}

var (
	// srun: launching StepId=5.1 on host node1, 2 tasks: [0-1]
	launchingRE = regexp.MustCompile(`launching StepId=(\S+) on host (\S+), \d+ tasks?: (\S+)`)
	// srun: error: node1: tasks 0-1: Killed   /   ..._task_finish: node1: task 0: Completed
	taskEndRE = regexp.MustCompile(`: (\S+): tasks? ([0-9,\-\[\]]+): (.+)$`)
	// *** STEP 5.1 ON node1 CANCELLED AT 2026-01-02T03:04:05 DUE TO TIME LIMIT ***
	cancelledRE = regexp.MustCompile(`\*\*\* (STEP|JOB) (\S+) ON (\S+) CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))?(?: \*\*\*|$)`)
	exitCodeRE  = regexp.MustCompile(`^Exited with exit code (\d+)`)
)

// srunLine reads one of srun's own lines (not a task's).
func (r *stepReport) srunLine(line string) {
	if m := launchingRE.FindStringSubmatch(line); m != nil {
		r.stepID = m[1]
		for _, t := range taskList(m[3]) {
			r.nodes[t] = m[2]
		}
		return
	}
	if strings.Contains(line, "Node failure on ") {
		_, node, _ := strings.Cut(line, "Node failure on ")
		r.verdict("failed", "Slurm reported a node failure on "+strings.TrimSpace(node))
		return
	}
	if m := taskEndRE.FindStringSubmatch(line); m != nil {
		end, ok := parseTaskEnd(m[3])
		if !ok {
			return
		}
		for _, t := range taskList(m[2]) {
			r.ends[t] = end
			if _, seen := r.nodes[t]; !seen {
				r.nodes[t] = m[1]
			}
		}
		if end.oom {
			r.verdict("oom", fmt.Sprintf("Slurm: task %s on %s ran out of memory", m[2], m[1]))
		}
		return
	}
	r.taskLine(line)
}

// taskLine looks for slurmstepd's words inside a task's output.
func (r *stepReport) taskLine(line string) {
	if m := cancelledRE.FindStringSubmatch(line); m != nil {
		what := strings.ToLower(m[1])
		switch due := m[4]; due {
		case "TIME LIMIT":
			r.verdict("timeout", fmt.Sprintf("Slurm cancelled %s %s on %s: time limit", what, m[2], m[3]))
		case "":
			// cancelled by a user (or by the runner's own kill): not a verdict
		default:
			r.verdict("failed", fmt.Sprintf("Slurm cancelled %s %s on %s: %s", what, m[2], m[3], strings.ToLower(due)))
		}
		return
	}
	if strings.Contains(line, "oom-kill event") || strings.Contains(line, "out-of-memory handler") {
		msg := strings.TrimSpace(line)
		if _, after, ok := strings.Cut(line, "Detected "); ok {
			msg = after
		}
		r.verdict("oom", "Slurm detected "+msg)
	}
}

// verdict keeps the first of Slurm's verdicts, except that an out-of-memory
// kill explains a later cancellation better than the other way round.
func (r *stepReport) verdict(outcome, reason string) {
	if r.outcome == "" || (outcome == "oom" && r.outcome != "oom") {
		r.outcome, r.reason = outcome, reason
	}
}

// parseTaskEnd reads "Exited with exit code 3", "Completed", "Killed",
// "Segmentation fault (core dumped)", "Out Of Memory".
func parseTaskEnd(s string) (taskEnd, bool) {
	s = strings.TrimSpace(s)
	if s == "Completed" {
		return taskEnd{}, true
	}
	if m := exitCodeRE.FindStringSubmatch(s); m != nil {
		c, _ := strconv.Atoi(m[1])
		return taskEnd{code: c}, true
	}
	if strings.EqualFold(s, "Out Of Memory") {
		return taskEnd{code: -1, signal: "SIGKILL", oom: true}, true
	}
	text := strings.TrimSuffix(s, " (core dumped)")
	for sig := syscall.Signal(1); sig < 65; sig++ {
		if strings.EqualFold(sig.String(), text) {
			if name := unix.SignalName(sig); name != "" {
				return taskEnd{code: -1, signal: name}, true
			}
		}
	}
	return taskEnd{}, false
}

// taskList expands srun's task lists: "3", "0-1", "[0-1]", "[0,2-3]".
func taskList(s string) []int {
	s = strings.Trim(s, "[]")
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				continue
			}
		}
		for t := a; t <= b; t++ {
			out = append(out, t)
		}
	}
	return out
}

// labelled splits a --label line "  1: text" into task 1 and "text".
func labelled(line string) (int, string, bool) {
	head, rest, ok := strings.Cut(line, ": ")
	if !ok {
		if h, found := strings.CutSuffix(line, ":"); found { // an empty line of a task
			head, rest, ok = h, "", true
		}
	}
	if !ok {
		return 0, "", false
	}
	t, err := strconv.Atoi(strings.TrimSpace(head))
	if err != nil || t < 0 {
		return 0, "", false
	}
	return t, rest, true
}

// srunNoise is srun's verbose chatter that need not reach the rank logs.
func srunNoise(line string) bool {
	if !strings.HasPrefix(line, "srun: ") {
		return false
	}
	return !strings.HasPrefix(line, "srun: error:") && !strings.HasPrefix(line, "srun: warning:") &&
		!strings.HasPrefix(line, "srun: Force Terminated") && !strings.Contains(line, "launching StepId=")
}
