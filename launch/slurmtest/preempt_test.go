package slurmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// TestScancelOfTheAllocationIsAnInterruption (issue 38, audit N1/N7, SL-6):
// scancel of the allocation a sweep runs in, mid-trial, records the trial in
// flight as interrupted, never crashed, and the trial after it never as
// failed ("Slurm job has expired"): the sweep stops, and --resume in a new
// allocation runs every trial exactly once.
func TestScancelOfTheAllocationIsAnInterruption(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// slow steps: the first trial runs long enough to be cut
	p := study(t, "slurm-preempt", "5m", "{fault.kind: slow, fault.rank: 0, fault.slow_ms: 1500}", "{grad_accum: 2}")
	out := t.TempDir()
	name := fmt.Sprintf("cs-preempt-%d", time.Now().UnixNano())
	cmd := exec.CommandContext(ctx, "salloc", "-J", name, "-n2", "-t", "5", cluster.bin, "run", p, "--out", out, "--kill-grace", "2s")
	var text bytes.Buffer
	cmd.Stdout, cmd.Stderr = &text, &text
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		logs, _ := filepath.Glob(filepath.Join(out, "*", "*", "logs", "*", "rank0.*"))
		return len(logs) > 0
	}, 2*time.Minute, 100*time.Millisecond, "the first trial never started: %s", &text)
	time.Sleep(2 * time.Second) // inside its steps
	id, err := exec.CommandContext(ctx, "squeue", "-h", "-n", name, "-o", "%i").Output()
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(string(id)), "the allocation %s", name)
	require.NoError(t, exec.CommandContext(ctx, "scancel", strings.TrimSpace(string(id))).Run())
	_ = cmd.Wait()
	run := onlyRun(t, out)
	for _, tr := range run.Trials {
		assert.NotEqual(t, store.Crashed, tr.Outcome, "%s: %s\n%s", tr.ID, tr.Error, &text)
		assert.NotEqual(t, store.Failed, tr.Outcome, "%s: %s\n%s", tr.ID, tr.Error, &text)
	}
	if cmd.ProcessState != nil {
		assert.NotEqual(t, 0, cmd.ProcessState.ExitCode(), "cut: not complete\n%s", &text)
		assert.NotEqual(t, 1, cmd.ProcessState.ExitCode(), "no trial failed\n%s", &text)
	}

	code, again := casestudy(t, ctx, []string{"salloc", "-n2", "-t", "5"}, "run", p, "--resume", run.Dir)
	require.Equal(t, 0, code, again)
	done, err := store.ReadRun(run.Dir)
	require.NoError(t, err)
	ok := map[string]int{}
	for _, tr := range done.Trials {
		if tr.Outcome == store.OK {
			ok[tr.ID]++
		}
	}
	assert.Len(t, ok, len(done.Manifest.Plan), again)
	for id, n := range ok {
		assert.Equal(t, 1, n, id)
	}
}

// TestScancelOfASubmittedJobThenResubmit (issue 38, audit N1, SL-8): scancel
// of a --submit batch job mid-trial (SIGTERM to the runner and its ranks at
// once), then the documented resume, sbatch of the same script: the cut
// trial is rerun and the resubmitted job completes the run, exit status 0.
func TestScancelOfASubmittedJobThenResubmit(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := study(t, "slurm-preempt-submit", "5m", "{fault.kind: slow, fault.rank: 0, fault.slow_ms: 1500}", "{grad_accum: 2}")
	out := t.TempDir()
	code, text := casestudy(t, ctx, nil, "run", p, "--launcher", "slurm", "--submit", "--out", out, "--time", "5")
	require.Equal(t, 0, code, text)
	var runDir, job string
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "results: "); ok {
			runDir = v
		}
	}
	require.NotEmpty(t, runDir, text)
	sub, err := os.ReadFile(filepath.Join(runDir+".slurm", "job.json"))
	require.NoError(t, err)
	if i := strings.Index(string(sub), `"job_id": "`); i >= 0 {
		job, _, _ = strings.Cut(string(sub)[i+len(`"job_id": "`):], `"`)
	}
	require.NotEmpty(t, job, "%s", sub)
	require.Eventually(t, func() bool {
		logs, _ := filepath.Glob(filepath.Join(runDir, "logs", "*", "rank0.*"))
		return len(logs) > 0
	}, 2*time.Minute, 100*time.Millisecond, "the first trial never started")
	time.Sleep(2 * time.Second)
	require.NoError(t, exec.CommandContext(ctx, "scancel", job).Run())
	require.Eventually(t, func() bool {
		st, _ := exec.CommandContext(ctx, "squeue", "-h", "-j", job, "-o", "%T").Output()
		return strings.TrimSpace(string(st)) == ""
	}, time.Minute, 200*time.Millisecond, "job %s still queued", job)
	recs, err := store.ReadTrials(filepath.Join(runDir, "trials.jsonl"))
	require.NoError(t, err)
	for _, tr := range recs {
		assert.NotEqual(t, store.Crashed, tr.Outcome, "%s: %s", tr.ID, tr.Error)
	}

	again, err := exec.CommandContext(ctx, "sbatch", "--wait", "--parsable", filepath.Join(runDir+".slurm", "job.sbatch")).CombinedOutput()
	id := strings.TrimSpace(string(again))
	jobOut, _ := os.ReadFile(filepath.Join(runDir+".slurm", "job-"+id+".out"))
	require.NoError(t, err, "the resubmitted job exits 0:\n%s\n%s", again, jobOut)
	done, err := store.ReadRun(runDir)
	require.NoError(t, err)
	ok := map[string]int{}
	for _, tr := range done.Trials {
		if tr.Outcome == store.OK {
			ok[tr.ID]++
		}
	}
	assert.Len(t, ok, len(done.Manifest.Plan), "%s", jobOut)
}
