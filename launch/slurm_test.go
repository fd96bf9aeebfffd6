package launch

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStepReport(t *testing.T) {
	tests := []struct {
		description string
		srun        []string // srun's own lines
		task        []string // lines inside tasks' output
		ends        map[int]taskEnd
		nodes       map[int]string
		outcome     string
		reason      string
	}{
		{description: "a rank exits non-zero, kill-on-bad-exit ends the other",
			srun: []string{
				"srun: launching StepId=2.0 on host localhost, 2 tasks: [0-1]",
				"srun: error: localhost: task 1: Exited with exit code 3",
				"srun: error: localhost: task 0: Terminated",
			},
			task:  []string{"slurmstepd-localhost: error: *** STEP 2.0 ON localhost CANCELLED AT 2026-12-02T11:13:59 ***"},
			ends:  map[int]taskEnd{1: {code: 3}, 0: {code: -1, signal: "SIGTERM"}},
			nodes: map[int]string{0: "localhost", 1: "localhost"}},
		{description: "time limit",
			srun:  []string{"srun: error: localhost: tasks 0-1: Killed"},
			task:  []string{"slurmstepd-localhost: error: *** STEP 2.1 ON localhost CANCELLED AT 2026-12-02T11:15:26 DUE TO TIME LIMIT ***"},
			ends:  map[int]taskEnd{0: {code: -1, signal: "SIGKILL"}, 1: {code: -1, signal: "SIGKILL"}},
			nodes: map[int]string{0: "localhost", 1: "localhost"}, outcome: "timeout",
			reason: "Slurm cancelled step 2.1 on localhost: time limit"},
		{description: "two nodes complete",
			srun: []string{
				"srun: launching StepId=7.3 on host n1, 2 tasks: [0-1]",
				"srun: launching StepId=7.3 on host n2, 2 tasks: [2-3]",
				"srun: launch/slurm: _task_finish: n1: tasks 0-1: Completed",
				"srun: launch/slurm: _task_finish: n2: tasks 2-3: Completed",
			},
			ends:  map[int]taskEnd{0: {}, 1: {}, 2: {}, 3: {}},
			nodes: map[int]string{0: "n1", 1: "n1", 2: "n2", 3: "n2"}},
		{description: "out of memory",
			srun: []string{"srun: error: gpu7: task 0: Out Of Memory"},
			task: []string{"slurmstepd: error: Detected 1 oom-kill event(s) in StepId=9.0. Some of your processes may have been killed by the cgroup out-of-memory handler."},
			ends: map[int]taskEnd{0: {code: -1, signal: "SIGKILL", oom: true}}, nodes: map[int]string{0: "gpu7"},
			outcome: "oom", reason: "Slurm detected 1 oom-kill event(s) in StepId=9.0. Some of your processes may have been killed by the cgroup out-of-memory handler."},
		{description: "node failure",
			srun:  []string{"srun: error: Node failure on gpu3"},
			task:  []string{"slurmstepd: error: *** STEP 4.2 ON gpu3 CANCELLED AT 2026-01-02T03:04:05 DUE TO NODE FAILURE ***"},
			ends:  map[int]taskEnd{},
			nodes: map[int]string{}, outcome: "failed", reason: "Slurm cancelled step 4.2 on gpu3: node failure"},
		{description: "a segfault with a core",
			srun:  []string{"srun: error: n1: task 2: Segmentation fault (core dumped)"},
			ends:  map[int]taskEnd{2: {code: -1, signal: "SIGSEGV"}},
			nodes: map[int]string{2: "n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			r := newStepReport()
			for _, l := range tt.task {
				r.taskLine(l)
			}
			for _, l := range tt.srun {
				r.srunLine(l)
			}
			assert.Equal(t, tt.ends, r.ends)
			assert.Equal(t, tt.nodes, r.nodes)
			assert.Equal(t, tt.outcome, r.outcome)
			assert.Equal(t, tt.reason, r.reason)
		})
	}
}

// TestExitOrder: a rank's own failure comes before the ranks
// --kill-on-bad-exit ended, whether Slurm reports those as a signal or as
// the code their shell exited with (seen in launch/slurmtest's
// TestLauncherExits, 2026-12-07: rank 0's "exit code 143" sent first).
func TestExitOrder(t *testing.T) {
	own, term := Exit{Rank: 1, Code: 3}, Exit{Rank: 0, Code: 143}
	assert.Less(t, exitOrder(own), exitOrder(term))
	assert.Less(t, exitOrder(own), exitOrder(Exit{Code: 137}))
	assert.Less(t, exitOrder(own), exitOrder(Exit{Code: -1, Signal: "SIGTERM"}))
	assert.Less(t, exitOrder(term), exitOrder(Exit{}))
	assert.Equal(t, exitOrder(Exit{Code: 1}), exitOrder(Exit{Code: 139})) // 128+SIGSEGV: its own failure
}

func TestTaskListAndLabels(t *testing.T) {
	assert.Equal(t, []int{3}, taskList("3"))
	assert.Equal(t, []int{0, 1}, taskList("0-1"))
	assert.Equal(t, []int{0, 2, 3}, taskList("[0,2-3]"))
	assert.Empty(t, taskList("x"))

	for _, tt := range []struct {
		line string
		task int
		rest string
		ok   bool
	}{
		{"0: hello", 0, "hello", true},
		{" 12: a: b", 12, "a: b", true},
		{"1:", 1, "", true},
		{"srun: error: x", 0, "", false},
		{"-1: no", 0, "", false},
	} {
		task, rest, ok := labelled(tt.line)
		assert.Equal(t, tt.ok, ok, tt.line)
		if ok {
			assert.Equal(t, tt.task, task, tt.line)
			assert.Equal(t, tt.rest, rest, tt.line)
		}
	}
}

func TestStepArgs(t *testing.T) {
	parent := []string{"PATH=/bin", "NCCL_DEBUG=WARN", "CUDA_VISIBLE_DEVICES=0,1,2,3", "SLURM_GPUS_PER_TASK=1", "SLURM_GPU_BIND=single:1"}
	rank := func(k int, gpu string) Rank {
		set := map[string]string{"CASESTUDY_RANK": string(rune('0' + k)), "CASESTUDY_TOKEN": "t", "NCCL_ALGO": "Ring"}
		if gpu != "" {
			set["CUDA_VISIBLE_DEVICES"] = gpu
		}
		return Rank{Rank: k, GPU: gpu, Env: BuildEnv(parent, set, []string{"NCCL_DEBUG"})}
	}
	s := &Slurm{Args: []string{"--exclusive"}, CPUsPerNode: 64}

	args, env, err := s.StepArgs(Spec{Trial: "abc", Nodes: 2, Timeout: 90 * time.Second,
		Ranks: []Rank{rank(0, "0"), rank(1, "1"), rank(2, "0"), rank(3, "1")}})
	require.NoError(t, err)
	assert.Subset(t, args, []string{"--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--kill-on-bad-exit=1",
		"--export=ALL", "--time=2", "--label", "--exclusive"})
	assert.Contains(t, args, "--gpus-per-node=2", "every task sees its node's GPUs: NCCL needs its NVLink peers visible")
	assert.Subset(t, args, []string{"--cpus-per-task=31", "--cpu-bind=cores", "--overlap"}, "the node's 64 CPUs less the runner's split over its 2 tasks")
	for _, a := range args {
		assert.NotContains(t, a, "per-task=1", "no GPU confined to one task")
		assert.NotContains(t, a, "per_task", "no GPU confined to one task")
		assert.NotContains(t, a, "--gpu-bind", "no GPU confined to one task")
	}
	assert.Equal(t, []string{"PATH=/bin", "CASESTUDY_TOKEN=t", "NCCL_ALGO=Ring"}, env,
		"per-rank variables are Slurm's (SLURM_PROCID, GPU binding); the allocation's per-task GPU settings do not reach srun; auto knobs stay unset")

	args, env, err = s.StepArgs(Spec{Trial: "cpu", Ranks: []Rank{rank(0, ""), rank(1, "")}})
	require.NoError(t, err)
	assert.Contains(t, args, "--ntasks=2")
	assert.NotContains(t, strings.Join(args, " "), "--gpu")
	assert.NotContains(t, strings.Join(args, " "), "--time")
	assert.Contains(t, env, "CUDA_VISIBLE_DEVICES=0,1,2,3", "a CPU trial keeps the parent's devices")

	assert.Subset(t, args, []string{"--cpus-per-task=31", "--cpu-bind=cores"}, "CPU ranks get their share too")

	args, _, err = s.StepArgs(Spec{Trial: "mps", ProcsPerGPU: 2, Ranks: []Rank{rank(0, "0"), rank(1, "0"), rank(2, "1")}})
	require.NoError(t, err)
	assert.Subset(t, args, []string{"--gpus-per-node=2", "--cpus-per-task=21"})
	assert.Equal(t, 1, CPUsPerTask(2, 2), "never below one")
	assert.Equal(t, 27, CPUsPerTask(224, 8))

	own := &Slurm{Args: []string{"-c", "4", "--cpu-bind=sockets"}, CPUsPerNode: 64}
	args, _, err = own.StepArgs(Spec{Trial: "own", Ranks: []Rank{rank(0, "0"), rank(1, "1")}})
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(args, " "), "--cpus-per-task", "the study's srun_args choose the CPUs")
	assert.NotContains(t, strings.Join(args, " "), "--cpu-bind=cores")
	args, _, err = (&Slurm{}).StepArgs(Spec{Trial: "unknown", Ranks: []Rank{rank(0, "0"), rank(1, "1")}})
	require.NoError(t, err)
	assert.NotContains(t, strings.Join(args, " "), "--cpus-per-task", "CPUs unknown: srun's default")

	_, _, err = s.StepArgs(Spec{Trial: "odd", Nodes: 2, Ranks: []Rank{rank(0, ""), rank(1, ""), rank(2, "")}})
	assert.ErrorContains(t, err, "3 ranks do not spread evenly over 2 nodes")

	bad := rank(1, "")
	bad.Env = append(bad.Env, "EXTRA=1")
	_, _, err = s.StepArgs(Spec{Trial: "env", Ranks: []Rank{rank(0, ""), bad}})
	assert.ErrorContains(t, err, "rank 1's environment differs from rank 0's in EXTRA")
}

func TestAllocatedCPUsPerNode(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want int
	}{
		{[]string{"SLURM_JOB_CPUS_PER_NODE=72(x2)"}, 72},
		{[]string{"SLURM_JOB_CPUS_PER_NODE=72,36(x3)", "SLURM_CPUS_ON_NODE=72"}, 36},
		{[]string{"SLURM_JOB_CPUS_PER_NODE=8"}, 8},
		{[]string{"SLURM_CPUS_ON_NODE=16"}, 16},
		{[]string{"SLURM_JOB_CPUS_PER_NODE=x"}, 0},
		{[]string{"PATH=/bin"}, 0},
	} {
		assert.Equal(t, tt.want, AllocatedCPUsPerNode(tt.env), "%v", tt.env)
	}
}

func TestDeadline(t *testing.T) {
	s := &Slurm{}
	assert.Equal(t, 3*time.Minute, s.Deadline(time.Minute))
	assert.Equal(t, 4*time.Minute, s.Deadline(61*time.Second))
	assert.Equal(t, time.Minute, DeadlineFor(Local{}, time.Minute))
	assert.Equal(t, 3*time.Minute, DeadlineFor(s, time.Minute))
}

func TestInAllocation(t *testing.T) {
	assert.Equal(t, "", InAllocation([]string{"PATH=/bin"}))
	assert.Equal(t, "42", InAllocation([]string{"SLURM_JOB_ID=41", "SLURM_JOB_ID=42"}))
	_, err := NewSlurm([]string{"PATH=/bin"}, nil)
	assert.ErrorContains(t, err, "--submit")
}

func TestBatchScript(t *testing.T) {
	b := Batch{JobName: "casestudy-gpt", Partition: "gpu", Account: "proj", Nodes: 2, TasksPerNode: 8, GPUsPerNode: 8,
		TimeMinutes: 90, Output: "/r/x.slurm/job.out", Chdir: "/home/u", Extra: []string{"--exclusive"},
		Env:     map[string]string{"CASESTUDY_ENGINE_LIB": "/opt/cs/lib engine.so"},
		Command: []string{"/opt/cs/casestudy", "run", "/s/gpt.yaml", "--launcher", "slurm"}}
	s, err := b.Script()
	require.NoError(t, err)
	for _, want := range []string{"#!/bin/bash\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=8\n",
		"#SBATCH --gpus-per-node=8\n", "#SBATCH --time=90\n", "#SBATCH --partition=gpu\n", "#SBATCH --account=proj\n",
		"#SBATCH --exclusive\n", "export CASESTUDY_ENGINE_LIB='/opt/cs/lib engine.so'\n",
		"exec /opt/cs/casestudy run /s/gpt.yaml --launcher slurm\n"} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "--qos")
	assert.NotContains(t, s, "#SBATCH --exclusive\n#SBATCH --time")
	b.Exclusive = true
	s, err = b.Script()
	require.NoError(t, err)
	assert.Contains(t, s, "#SBATCH --gpus-per-node=8\n#SBATCH --exclusive\n")
	b.Exclusive = false
	assert.NotContains(t, s, "--resume")

	b.Resume, b.RunDir = []string{"/opt/cs/casestudy", "run", "--resume", "/r/x"}, "/r/x"
	s, err = b.Script()
	require.NoError(t, err)
	assert.Contains(t, s, "if [ -e /r/x/manifest.json ]; then\n  exec /opt/cs/casestudy run --resume /r/x\nfi\nexec /opt/cs/casestudy run /s/gpt.yaml")
	b.Resume = nil
	b.GPUsPerNode = 0
	s, _ = b.Script()
	assert.NotContains(t, s, "gpus-per-node")

	b.Extra = []string{"--a\n--b"}
	_, err = b.Script()
	assert.ErrorContains(t, err, "spans lines")
	_, err = Batch{}.Script()
	assert.Error(t, err)
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, "/a/b-c_d.e", ShellQuote("/a/b-c_d.e"))
	assert.Equal(t, "'a b'", ShellQuote("a b"))
	assert.Equal(t, `'it'\''s'`, ShellQuote("it's"))
	assert.Equal(t, "''", ShellQuote(""))
}
