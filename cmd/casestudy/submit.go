package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// submission is job.json in a run's submission folder (RUN_DIR.slurm/).
type submission struct {
	JobID     string    `json:"job_id"`
	RunDir    string    `json:"run_dir"`
	Study     string    `json:"study"`
	Script    string    `json:"script"`
	Output    string    `json:"output"`
	Submitted time.Time `json:"submitted"`
}

// submitOwnFlags are run's flags that --submit does not pass to the job's own
// `casestudy run` (it sets them itself, or they are the submission's).
var submitOwnFlags = map[string]bool{"submit": true, "launcher": true, "out": true, "run-id": true,
	"partition": true, "account": true, "time": true, "gpus-per-node": true}

// runSubmit writes a batch script that runs the study inside an allocation
// with the slurm launcher, submits it, and records the job next to the run
// directory it will create: RUN_DIR.slurm/{job.sbatch,job.json,job-<job ID>.out}.
func runSubmit(ctx context.Context, cmd *cobra.Command, o *runOptions, s *study.Study, plan *study.Plan, studyPath string, env []string) error {
	stdout := cmd.OutOrStdout()
	if launch.InAllocation(env) != "" {
		return exitcode.Usage(errors.New("--submit submits a new batch job; inside an allocation ($SLURM_JOB_ID is set) run without --submit"))
	}
	outAbs, err := filepath.Abs(o.out)
	if err != nil {
		return exitcode.Usage(fmt.Errorf("--out %s: %w", o.out, err))
	}
	studyAbs, err := filepath.Abs(studyPath)
	if err != nil {
		return exitcode.Usage(err)
	}
	exe, err := os.Executable()
	if err != nil {
		return exitcode.With(exitcode.Environment, fmt.Errorf("locating the casestudy binary for the job: %w", err))
	}
	cwd, err := os.Getwd()
	if err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	b, err := batchFor(&o.launcher, s, plan)
	if err != nil {
		return err
	}
	runID := store.NewRunID(time.Now())
	runDir := store.RunDir(outAbs, s.Name, runID)
	subDir := runDir + ".slurm"
	if err := os.MkdirAll(subDir, 0o755); err != nil {
		return exitcode.With(exitcode.Environment, fmt.Errorf("creating %s: %w", subDir, err))
	}
	b.JobName = "casestudy-" + store.SafeName(s.Name)
	b.Output = filepath.Join(subDir, "job-%j.out") // %j: each submission (requeue) its own
	b.Chdir = cwd
	b.Command = append([]string{exe, "run", studyAbs, "--launcher", "slurm", "--out", outAbs, "--run-id", runID}, passedFlags(cmd)...)
	b.Resume = append([]string{exe, "run", studyAbs, "--launcher", "slurm", "--resume", runDir}, passedFlags(cmd)...)
	b.RunDir = runDir
	b.Env = map[string]string{}
	if lib := getenvList(env, "CASESTUDY_ENGINE_LIB"); lib != "" {
		if abs, err := filepath.Abs(lib); err == nil {
			b.Env["CASESTUDY_ENGINE_LIB"] = abs
		}
	}
	text, err := b.Script()
	if err != nil {
		return exitcode.Usage(err)
	}
	script := filepath.Join(subDir, "job.sbatch")
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	id, err := launch.Submit(ctx, script, env)
	if err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	sub := submission{JobID: id, RunDir: runDir, Study: studyAbs, Script: script, Output: b.Output, Submitted: time.Now().UTC()}
	out := strings.ReplaceAll(b.Output, "%j", id)
	j, _ := json.MarshalIndent(sub, "", "  ")
	if err := store.WriteFileAtomic(filepath.Join(subDir, "job.json"), append(j, '\n')); err != nil {
		return exitcode.With(exitcode.Environment, err)
	}
	fmt.Fprintf(stdout, "submitted Slurm job %s: %s (%d trials planned) on %d node(s), %d tasks per node, time limit %d min\n",
		id, s.Name, len(plan.Trials), b.Nodes, b.TasksPerNode, b.TimeMinutes)
	fmt.Fprintf(stdout, "results: %s\n  script: %s\n  output: %s\nfollow with: casestudy status %s\n",
		runDir, script, out, launch.ShellQuote(runDir))
	return nil
}

// batchFor sizes the job from the study (nodes, ranks, GPUs per node) and the
// flags or the study's launcher section (partition, account, time, ...).
func batchFor(o *launcherOptions, s *study.Study, plan *study.Plan) (launch.Batch, error) {
	pick := func(flag, key string) string {
		if flag != "" {
			return flag
		}
		return s.Launcher[key]
	}
	for flag, v := range map[string]string{"partition": o.partition, "account": o.account} {
		if v == "" {
			continue
		}
		if err := launch.CheckSetting(flag, v); err != nil {
			return launch.Batch{}, exitcode.Usage(fmt.Errorf("--%s: %w", flag, err))
		}
	}
	nodes, perNode, gpus := max(s.Workload.Nodes, 1), 1, 0
	for _, t := range plan.Trials {
		p := s.PlacementFor(t.Knobs, s.Workload.Device)
		nodes, perNode, gpus = p.Nodes, max(perNode, p.RanksPerNode), max(gpus, p.GPUsPerNode)
	}
	if o.gpusPerNode >= 0 {
		gpus = o.gpusPerNode
	}
	b := launch.Batch{Nodes: nodes, TasksPerNode: perNode, GPUsPerNode: gpus,
		Partition: pick(o.partition, "partition"), Account: pick(o.account, "account"),
		QOS: s.Launcher["qos"], Reservation: s.Launcher["reservation"], Constraint: s.Launcher["constraint"],
		Extra: strings.Fields(s.Launcher["extra_args"])}
	if t := pick(o.timeLimit, "time_limit"); t != "" {
		m, err := launch.ParseTimeLimit(t)
		if err != nil {
			where := "--time"
			if o.timeLimit == "" {
				where = s.Path + ": launcher.time_limit"
			}
			return b, exitcode.Usage(fmt.Errorf("%s: %w", where, err))
		}
		b.TimeMinutes = m
	} else {
		timeout := s.Workload.Timeout
		if timeout <= 0 {
			timeout = 30 * time.Minute
		}
		launches := len(plan.Trials) * s.Workload.MaxLaunches()
		if plan.Strategy == "greedy" {
			launches = max(plan.Size, 1) * s.Workload.MaxLaunches()
		}
		b.TimeMinutes = int((time.Duration(launches)*timeout+10*time.Minute)/time.Minute) + 1
	}
	return b, nil
}

// passedFlags are the run flags the user set that the job's run needs too.
func passedFlags(cmd *cobra.Command) []string {
	var out []string
	visit := func(f *pflag.Flag) {
		if submitOwnFlags[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	}
	cmd.Flags().Visit(visit)
	return out
}
