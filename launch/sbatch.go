package launch

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/casestudy/casestudy/launch/setting"
)

// Batch is a Slurm batch job that runs one study inside its allocation.
type Batch struct {
	JobName      string
	Partition    string
	Account      string
	QOS          string
	Reservation  string
	Constraint   string
	Nodes        int
	TasksPerNode int
	GPUsPerNode  int               // 0: no GPU request
	TimeMinutes  int               // the job's time limit
	Output       string            // sbatch --output (absolute)
	Chdir        string            // the job's working directory (absolute)
	Extra        []string          // more sbatch arguments, one per #SBATCH line
	Env          map[string]string // exported before the command
	Command      []string          // what the job runs (casestudy run ...)
	// Resume runs instead of Command when RunDir already holds a manifest
	// (the job was requeued or submitted again): the run goes on where it stopped.
	Resume []string
	RunDir string
	// Exclusive asks for whole nodes (--exclusive): every CPU of the node
	// belongs to the job, and each trial's srun step splits them between
	// its tasks (Slurm.StepArgs: --cpus-per-task, --cpu-bind=cores).
	Exclusive bool
}

// Script is the batch script: #SBATCH lines, the exports, then the command.
func (b Batch) Script() (string, error) {
	if len(b.Command) == 0 || b.Nodes < 1 || b.TasksPerNode < 1 || b.TimeMinutes < 1 {
		return "", errors.New("batch job: command, nodes, tasks per node and time are required")
	}
	var s strings.Builder
	s.WriteString("#!/bin/bash\n# Written by casestudy run --submit. Submitted again (or requeued), it resumes the run.\n")
	var bad error
	opt := func(flag, v string) {
		if v == "" {
			return
		}
		q, err := sbatchQuote(v)
		if err != nil {
			bad = errors.Join(bad, fmt.Errorf("batch job: --%s %w", flag, err))
			return
		}
		fmt.Fprintf(&s, "#SBATCH --%s=%s\n", flag, q)
	}
	opt("job-name", b.JobName)
	opt("nodes", strconv.Itoa(b.Nodes))
	opt("ntasks-per-node", strconv.Itoa(b.TasksPerNode))
	if b.GPUsPerNode > 0 {
		opt("gpus-per-node", strconv.Itoa(b.GPUsPerNode))
	}
	if b.Exclusive {
		s.WriteString("#SBATCH --exclusive\n")
	}
	opt("time", strconv.Itoa(b.TimeMinutes))
	opt("partition", b.Partition)
	opt("account", b.Account)
	opt("qos", b.QOS)
	opt("reservation", b.Reservation)
	opt("constraint", b.Constraint)
	opt("output", b.Output)
	opt("chdir", b.Chdir)
	for _, e := range b.Extra {
		if strings.IndexFunc(e, unicode.IsControl) >= 0 {
			return "", fmt.Errorf("batch job: extra argument %q spans lines or holds a control character", e)
		}
		fmt.Fprintf(&s, "#SBATCH %s\n", e)
	}
	if bad != nil {
		return "", bad
	}
	s.WriteString("set -euo pipefail\n")
	keys := make([]string, 0, len(b.Env))
	for k := range b.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&s, "export %s=%s\n", k, ShellQuote(b.Env[k]))
	}
	exec := func(indent string, argv []string) {
		s.WriteString(indent + "exec")
		for _, a := range argv {
			s.WriteString(" " + ShellQuote(a))
		}
		s.WriteString("\n")
	}
	if len(b.Resume) > 0 && b.RunDir != "" {
		fmt.Fprintf(&s, "if [ -e %s ]; then\n", ShellQuote(b.RunDir+"/manifest.json"))
		exec("  ", b.Resume)
		s.WriteString("fi\n")
	}
	exec("", b.Command)
	return s.String(), nil
}

// sbatchQuote writes v as one argument of a #SBATCH line. Slurm reads those
// lines itself (bash sees comments): whitespace ends an argument, an unquoted
// # starts a comment, and "..." with \ escapes keeps anything else together.
// Plain names stay bare; a line break or another control character cannot be
// written at all (it would end the line and start a shell command).
func sbatchQuote(v string) (string, error) {
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return "", fmt.Errorf("%q: a line break or control character (0x%02x) cannot go into a #SBATCH line", v, v[i])
	}
	if strings.IndexFunc(v, func(r rune) bool { return !setting.NameChar(r) && r != '/' && r != '=' && r != ':' && r != '%' }) < 0 {
		return v, nil
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`, nil
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '=' || r == '+' || r == ',' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Submit runs sbatch on script and returns the job ID.
func Submit(ctx context.Context, script string, env []string) (string, error) {
	sbatch, err := exec.LookPath("sbatch")
	if err != nil {
		return "", fmt.Errorf("--submit needs sbatch on PATH (run it on a Slurm login node): %w", err)
	}
	cmd := exec.CommandContext(ctx, sbatch, "--parsable", script)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("sbatch %s: %s", script, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("sbatch %s: %w", script, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "123" or "123;cluster"
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch %s printed %q, not a job ID", script, strings.TrimSpace(string(out)))
	}
	return id, nil
}
