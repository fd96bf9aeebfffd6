package launch

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"
)

// JobState asks Slurm how job id stands (PENDING, RUNNING, COMPLETED,
// FAILED, TIMEOUT, CANCELLED, ...): squeue while Slurm holds it, then
// scontrol (finished jobs for MinJobAge), then sacct (when accounting is on).
// It returns the state and the tool that told; an error when none knew.
func JobState(ctx context.Context, id string, env []string) (state, source string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	run := func(name string, args ...string) string {
		path, err := exec.LookPath(name)
		if err != nil {
			return ""
		}
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if s := firstLine(run("squeue", "-h", "-j", id, "-o", "%T")); s != "" {
		return s, "squeue", nil
	}
	if out := run("scontrol", "-o", "show", "job", id); out != "" {
		for _, f := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(f, "JobState="); ok {
				return v, "scontrol", nil
			}
		}
	}
	if s := firstLine(run("sacct", "-n", "-X", "-P", "-j", id, "-o", "State")); s != "" {
		return s, "sacct", nil
	}
	return "", "", errors.New("neither squeue, scontrol nor sacct knows job " + id +
		" (not on a Slurm host, or the job ended before the controller's MinJobAge and accounting is off)")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
