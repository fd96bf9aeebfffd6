package slurmtest

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/syncbuf"
	"github.com/casestudy/casestudy/launch"
)

// allocate holds an allocation for the test (salloc --no-shell) and returns
// an environment inside it.
func allocate(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("salloc", append([]string{"--no-shell", "-t", "3"}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var job string
	for _, f := range strings.Fields(string(out)) {
		if _, err := strconv.Atoi(f); err == nil {
			job = f // "salloc: Granted job allocation 12"
		}
	}
	require.NotEmpty(t, job, "%s", out)
	t.Cleanup(func() { _ = exec.Command("scancel", job).Run() })
	return append(os.Environ(), "SLURM_JOB_ID="+job)
}

// step runs script as a 2-rank step through launch.Slurm and returns the
// exits in the order they came and each rank's log.
func step(t *testing.T, env []string, gpus []string, script string) ([]launch.Exit, []*syncbuf.Buffer) {
	t.Helper()
	l, err := launch.NewSlurm(env, nil)
	require.NoError(t, err)
	spec := launch.Spec{Trial: "t", Path: "/bin/sh", Args: []string{"-c", script}, Timeout: time.Minute}
	var logs []*syncbuf.Buffer
	for k := 0; k < 2; k++ {
		set := map[string]string{"CASESTUDY_RANK": strconv.Itoa(k), "TRIAL_KNOB": "x"}
		gpu := ""
		if gpus != nil {
			gpu = gpus[k]
			set["CUDA_VISIBLE_DEVICES"] = gpu
		}
		logs = append(logs, &syncbuf.Buffer{})
		spec.Ranks = append(spec.Ranks, launch.Rank{Rank: k, GPU: gpu, Log: logs[k], Env: launch.BuildEnv(env, set, nil)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := l.Start(ctx, spec)
	require.NoError(t, err)
	var exits []launch.Exit
	for {
		select {
		case e, ok := <-g.Exits():
			if !ok {
				return exits, logs
			}
			exits = append(exits, e)
		case <-ctx.Done():
			g.Kill(time.Second)
			t.Fatalf("the step did not end; exits so far %+v", exits)
		}
	}
}

// TestLauncherExits: each rank's log gets its own output, the trial's
// environment reaches every task, and a rank's non-zero exit comes first
// with its code while --kill-on-bad-exit ends the other.
func TestLauncherExits(t *testing.T) {
	needCluster(t)
	t.Parallel()
	env := allocate(t, "-n2")
	exits, logs := step(t, env, nil, `echo "rank=$SLURM_PROCID knob=$TRIAL_KNOB"; [ "$SLURM_PROCID" = 1 ] && exit 3; sleep 30`)
	require.Len(t, exits, 2)
	assert.Equal(t, 1, exits[0].Rank, "the failing rank's exit comes first")
	assert.Equal(t, 3, exits[0].Code)
	assert.Empty(t, exits[0].Signal)
	assert.Equal(t, 0, exits[1].Rank)
	// Slurm reports the SIGTERM as the task's signal, or as the code its
	// shell exits with when the signal reached the shell's child (128+15).
	assert.True(t, exits[1].Killed() || exits[1].Code == 128+15, "kill-on-bad-exit ended rank 0: %+v", exits[1])
	for k, e := range exits {
		assert.Equal(t, "localhost", e.Node, "exit %d", k)
		assert.Empty(t, e.Outcome, "no verdict of Slurm's own")
	}
	assert.Contains(t, logs[0].String(), "rank=0 knob=x")
	assert.Contains(t, logs[1].String(), "rank=1 knob=x")
	assert.NotContains(t, logs[0].String(), "rank=1")
	assert.Contains(t, logs[1].String(), "task 1: Exited with exit code 3")
}

// TestStepSeesNodeGPUs: with GPUs every task of a step sees all of its
// node's GPUs (no per-task binding, even when the allocation asked for one
// per task: NCCL needs its NVLink peers visible, NVIDIA/nccl#1066), whatever
// CUDA_VISIBLE_DEVICES the runner had, and gets the node's CPUs divided by
// its tasks, one kept for the runner (--cpus-per-task, SLURM_CPUS_PER_TASK in
// the task: 6 CPUs, 2 tasks: 2 each).
func TestStepSeesNodeGPUs(t *testing.T) {
	needCluster(t)
	if cluster.noGPUs != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the GPU binding cannot be tested: %s", cluster.noGPUs)
		}
		t.Skip(cluster.noGPUs)
	}
	t.Parallel()
	env := allocate(t, "-n2", "-c3", "--gpus-per-task=1")
	env = append(env, "CUDA_VISIBLE_DEVICES=5,6", "SLURM_GPUS_PER_TASK=1", // what salloc exports to the shell
		"SLURM_JOB_CPUS_PER_NODE="+jobCPUs(t, env))
	exits, logs := step(t, env, []string{"5", "6"}, `echo "rank=$SLURM_PROCID local=$SLURM_LOCALID cvd=$CUDA_VISIBLE_DEVICES cpus=$SLURM_CPUS_PER_TASK own=${CASESTUDY_RANK:-none}"`)
	require.Len(t, exits, 2)
	for _, e := range exits {
		assert.Equal(t, 0, e.Code, "%+v", e)
		assert.NoError(t, e.Err)
	}
	// per-rank variables never travel: the rank is Slurm's (SLURM_PROCID)
	assert.Contains(t, logs[0].String(), "rank=0 local=0 cvd=0,1 cpus=2 own=none")
	assert.Contains(t, logs[1].String(), "rank=1 local=1 cvd=0,1 cpus=2 own=none")
}

// jobCPUs is the CPUs the allocation env is inside holds on its node, as
// salloc and sbatch export them (SLURM_JOB_CPUS_PER_NODE).
func jobCPUs(t *testing.T, env []string) string {
	t.Helper()
	job, _ := launch.LookupEnv(env, "SLURM_JOB_ID")
	out, err := exec.Command("squeue", "-h", "-j", job, "-o", "%C").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestStepThatCannotStart: a step the allocation cannot hold (2 tasks in a
// 1-CPU allocation) ends every rank with Slurm's reason, as failed.
func TestStepThatCannotStart(t *testing.T) {
	needCluster(t)
	t.Parallel()
	env := allocate(t, "-n1")
	exits, _ := step(t, env, nil, "true")
	require.Len(t, exits, 2)
	for _, e := range exits {
		assert.Equal(t, "failed", e.Outcome, "%+v", e)
		assert.Contains(t, e.Reason, "srun could not start a step in job")
		assert.Contains(t, e.Reason, "More processors requested than permitted")
	}
}
