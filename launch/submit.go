package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch/setting"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// Submission is job.json in a run's submission folder (RUN_DIR.slurm/).
type Submission struct {
	JobID     string    `json:"job_id"`
	RunDir    string    `json:"run_dir"`
	Study     string    `json:"study"`
	Script    string    `json:"script"`
	Output    string    `json:"output"` // the job's output file; %j is the job ID
	Submitted time.Time `json:"submitted"`
}

// SubmissionFile is where the submission of the run in runDir is recorded.
func SubmissionFile(runDir string) string { return filepath.Join(runDir+".slurm", "job.json") }

// ReadSubmission reads the submission of the run in runDir; nil when there
// is none.
func ReadSubmission(runDir string) (*Submission, error) {
	b, err := store.ReadRegular(SubmissionFile(runDir), 1<<20) // not a FIFO (audit N8)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var sub Submission
	if err := json.Unmarshal(b, &sub); err != nil {
		return nil, fmt.Errorf("%s: %w", SubmissionFile(runDir), err)
	}
	return &sub, nil
}

// SubmitOptions are the choices of `casestudy run --submit` beyond the study.
type SubmitOptions struct {
	Exe         string   // the casestudy binary the job runs (absolute)
	Out         string   // the results root (--out)
	RunArgs     []string // more arguments of the job's `casestudy run` (the user's flags)
	Env         []string // this process's environment
	Partition   string   // --partition, else launcher.partition
	Account     string   // --account, else launcher.account
	TimeLimit   string   // --time, else launcher.time_limit, else from the plan
	GPUsPerNode int      // --gpus-per-node; -1: workload.gpus (0 on device cpu)
}

// SubmitStudy writes a batch script that runs the study inside an allocation
// with the slurm launcher, submits it with sbatch, and records the job next
// to the run directory the job will create:
// RUN_DIR.slurm/{job.sbatch,job.json,job-<job ID>.out}.
func SubmitStudy(ctx context.Context, s *study.Study, plan *study.Plan, o SubmitOptions) (*Submission, Batch, error) {
	if InAllocation(o.Env) != "" {
		return nil, Batch{}, exitcode.Usage(errors.New("--submit submits a new batch job; inside an allocation ($SLURM_JOB_ID is set) run without --submit"))
	}
	outAbs, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, Batch{}, exitcode.Usage(fmt.Errorf("--out %s: %w", o.Out, err))
	}
	studyAbs, err := filepath.Abs(s.Path)
	if err != nil {
		return nil, Batch{}, exitcode.Usage(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, Batch{}, exitcode.With(exitcode.Environment, err)
	}
	b, err := BatchFor(s, plan, o)
	if err != nil {
		return nil, b, err
	}
	runID := store.NewRunID(time.Now())
	runDir := store.RunDir(outAbs, s.Name, runID)
	subDir := runDir + ".slurm"
	b.JobName = "casestudy-" + store.SafeName(s.Name)
	b.Output = filepath.Join(subDir, "job-%j.out") // %j: each submission (requeue) its own
	b.Chdir = cwd
	b.Command = append([]string{o.Exe, "run", studyAbs, "--launcher", "slurm", "--out", outAbs, "--run-id", runID}, o.RunArgs...)
	b.Resume = append([]string{o.Exe, "run", studyAbs, "--launcher", "slurm", "--resume", runDir}, o.RunArgs...)
	b.RunDir = runDir
	b.Env = map[string]string{}
	if lib, _ := LookupEnv(o.Env, "CASESTUDY_ENGINE_LIB"); lib != "" {
		if abs, err := filepath.Abs(lib); err == nil {
			b.Env["CASESTUDY_ENGINE_LIB"] = abs
		}
	}
	text, err := b.Script()
	if err != nil {
		return nil, b, exitcode.Usage(err)
	}
	// created only once the script is known good: a refused --out leaves nothing behind (audit N24)
	if err := os.MkdirAll(subDir, 0o755); err != nil {
		return nil, b, exitcode.With(exitcode.Environment, fmt.Errorf("creating %s: %w", subDir, err))
	}
	script := filepath.Join(subDir, "job.sbatch")
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		return nil, b, exitcode.With(exitcode.Environment, err)
	}
	id, err := Submit(ctx, script, o.Env)
	if err != nil {
		return nil, b, exitcode.With(exitcode.Environment, err)
	}
	sub := &Submission{JobID: id, RunDir: runDir, Study: studyAbs, Script: script, Output: b.Output, Submitted: time.Now().UTC()}
	j, _ := json.MarshalIndent(sub, "", "  ")
	if err := store.WriteFileAtomic(SubmissionFile(runDir), append(j, '\n')); err != nil {
		return nil, b, exitcode.With(exitcode.Environment, err)
	}
	return sub, b, nil
}

// BatchFor sizes the job from the study (nodes, ranks, GPUs per node) and the
// options or the study's launcher section (partition, account, time, ...).
func BatchFor(s *study.Study, plan *study.Plan, o SubmitOptions) (Batch, error) {
	pick := func(flag, key string) string {
		if flag != "" {
			return flag
		}
		return s.Launcher[key]
	}
	for flag, v := range map[string]string{"partition": o.Partition, "account": o.Account} {
		if v == "" {
			continue
		}
		if err := setting.Check(flag, v); err != nil {
			return Batch{}, exitcode.Usage(fmt.Errorf("--%s: %w", flag, err))
		}
	}
	nodes, perNode, gpus := max(s.Workload.Nodes, 1), 1, 0
	for _, t := range plan.Trials {
		p := s.PlacementFor(t.Knobs, s.Workload.Device)
		nodes, perNode, gpus = p.Nodes, max(perNode, p.RanksPerNode), max(gpus, p.GPUsPerNode)
	}
	if o.GPUsPerNode > 0 && o.GPUsPerNode < gpus {
		// Every trial needing more would be unsupported inside the job, after its queue wait.
		return Batch{}, exitcode.Usage(fmt.Errorf("--gpus-per-node %d: the study's largest trial needs %d GPUs a node; "+
			"ask for at least %d (or leave the flag out: the plan's count)", o.GPUsPerNode, gpus, gpus))
	}
	if o.GPUsPerNode >= 0 {
		gpus = o.GPUsPerNode
	}
	b := Batch{Nodes: nodes, TasksPerNode: perNode, GPUsPerNode: gpus,
		Partition: pick(o.Partition, "partition"), Account: pick(o.Account, "account"),
		QOS: s.Launcher["qos"], Reservation: s.Launcher["reservation"], Constraint: s.Launcher["constraint"],
		Extra: strings.Fields(s.Launcher["extra_args"])}
	// A GPU job holds whole nodes unless the study chose its CPUs or sharing
	// itself: with one CPU per task (Slurm's default) the ranks' launch,
	// autograd and NCCL proxy threads share one core.
	b.Exclusive = gpus > 0 && !hasArg(b.Extra, "--exclusive", "--oversubscribe", "-s", "--cpus-per-task", "-c", "--cpus-per-gpu", "--mincpus")
	if t := pick(o.TimeLimit, "time_limit"); t != "" {
		m, err := setting.ParseTimeLimit(t)
		if err != nil {
			where := "--time"
			if o.TimeLimit == "" {
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
