package slurmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// The cluster TestMain started: its slurm.conf, the casestudy binary built for
// the tests, the engine library; skip says why there is none (not under CI).
var cluster struct {
	dir, conf, bin, lib string
	skip                string
	noGPUs              string // why the cluster has no (fake) GPUs
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	ci := os.Getenv("CI") == "true"
	fail := func(why string) int {
		if ci {
			fmt.Fprintf(os.Stderr, "CI=true and the Slurm tests cannot run: %s\n", why)
			return 1
		}
		cluster.skip = why
		return m.Run()
	}
	for _, b := range []string{"srun", "sbatch", "salloc", "slurmctld", "slurmd", "munged"} {
		if _, err := exec.LookPath(b); err != nil {
			return fail(b + " not found: install slurm-wlm and munge (scripts/install-deps.sh)")
		}
	}
	if os.Geteuid() != 0 {
		return fail("the one-node test cluster needs root (munged and slurmd)")
	}
	lib, err := engine.Discover("") // $CASESTUDY_ENGINE_LIB, else the checkout's build/engine
	if err != nil {
		return fail("engine library not built (make engine): " + err.Error())
	}
	dir, err := os.MkdirTemp("", "casestudy-slurm-")
	if err != nil {
		return fail(err.Error())
	}
	defer os.RemoveAll(dir)
	cluster.dir, cluster.conf, cluster.lib = dir, filepath.Join(dir, "slurm.conf"), lib
	cluster.bin = filepath.Join(dir, "casestudy")
	if out, err := exec.Command("go", "build", "-o", cluster.bin, "../../cmd/casestudy").CombinedOutput(); err != nil {
		return fail("building casestudy: " + err.Error() + "\n" + string(out))
	}
	script, _ := filepath.Abs("../../scripts/slurm-test-cluster.sh")
	start := exec.Command(script, "start", dir)
	ports, err := freePorts(2)
	if err != nil {
		return fail("finding two free ports for slurmctld and slurmd: " + err.Error())
	}
	start.Env = append(os.Environ(), fmt.Sprintf("SLURMCTLD_PORT=%d", ports[0]), fmt.Sprintf("SLURMD_PORT=%d", ports[1]),
		"SLURM_TEST_CPUS=8", "SLURM_TEST_GPUS=2")
	if out, err := start.CombinedOutput(); err != nil {
		return fail("starting the test cluster: " + err.Error() + "\n" + string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, "gres.conf")); err != nil {
		cluster.noGPUs = "the test cluster has no fake GPUs (mknod not allowed)"
	}
	defer func() {
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test cluster: %v\n%s", err, out)
		}
	}()
	os.Setenv("SLURM_CONF", cluster.conf)
	os.Setenv(engine.EnvLibrary, lib)
	os.Unsetenv("SLURM_JOB_ID")
	return m.Run()
}

// freePorts returns n TCP ports free on this machine now, so that two test
// runs on one machine start clusters that do not collide.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen: n different ports
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster.skip != "" {
		t.Skip(cluster.skip)
	}
}

// study writes a tiny GPT study on 2 CPU ranks with the given trials.
func study(t *testing.T, name, timeout string, trials ...string) string {
	t.Helper()
	text := fmt.Sprintf(`name: %s
model: {family: gpt, preset: tiny, micro_batch: 2}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 1, timeout: %s, threads: 1}
baseline: {precision: fp32}
sweep:
  strategy: list
  trials:
`, name, timeout)
	for _, tr := range trials {
		text += "    - " + tr + "\n"
	}
	p := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// casestudy runs the test binary (under salloc when alloc is not empty).
func casestudy(t *testing.T, ctx context.Context, alloc []string, args ...string) (int, string) {
	t.Helper()
	argv := append(append(append([]string{}, alloc...), cluster.bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

func onlyRun(t *testing.T, out string) *store.Run {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(out, "*", "*", "manifest.json"))
	require.Len(t, ms, 1, "one run directory under %s", out)
	run, err := store.ReadRun(filepath.Dir(ms[0]))
	require.NoError(t, err)
	return run
}

func byIndex(run *store.Run) map[int]store.TrialRecord {
	out := map[int]store.TrialRecord{}
	for _, t := range run.Trials {
		out[t.Index] = t
	}
	return out
}

// TestStepsAndFaults: inside an allocation every trial's 2 ranks start as one
// srun step; a rank that exits non-zero fails its trial and the next runs.
func TestStepsAndFaults(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := study(t, "slurm-steps", "2m", "{grad_accum: 1}", "{fault.kind: exit, fault.rank: 1}", "{grad_accum: 2}")
	out := t.TempDir()
	code, text := casestudy(t, ctx, []string{"salloc", "-n2", "-t", "5"}, "run", p, "--out", out)
	require.Equal(t, 1, code, "a trial failed: exit status 1\n%s", text)
	assert.Contains(t, text, "each trial is one srun step", "SLURM_JOB_ID picks the slurm launcher")

	run := onlyRun(t, out)
	trials := byIndex(run)
	require.Len(t, trials, 3, text)
	for _, i := range []int{0, 2} {
		tr := trials[i]
		require.Equal(t, store.OK, tr.Outcome, "trial %d: %s", i, tr.Error)
		ranks := tr.Repeats[0].Ranks
		require.Len(t, ranks, 2)
		for k, r := range ranks {
			assert.Equal(t, k, r.Rank)
			assert.Equal(t, "localhost", r.Node, "rank -> node mapping recorded")
			assert.Len(t, r.Steps, 3, "rank %d learned its rank from SLURM_PROCID and trained", k)
		}
		log, err := os.ReadFile(filepath.Join(run.Dir, "logs", tr.ID, "rank1.r0.log"))
		require.NoError(t, err)
		assert.Regexp(t, `launching StepId=\d+\.\d+ on host localhost, 2 tasks`, string(log))
		assert.Contains(t, string(log), "worker: rank 1 joined")
	}
	failed := trials[1]
	assert.Contains(t, []store.Outcome{store.Failed, store.Crashed}, failed.Outcome, failed.Error)
	if failed.Outcome == store.Crashed {
		assert.Equal(t, 1, failed.FailedRank)
		assert.Equal(t, 1, failed.ExitCode)
	}

	var facts struct {
		JobID string   `json:"job_id"`
		Hosts []string `json:"hosts"`
	}
	b, err := os.ReadFile(filepath.Join(run.Dir, "slurm.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &facts))
	assert.NotEmpty(t, facts.JobID)
	self, _ := os.Hostname()
	assert.Equal(t, []string{self}, facts.Hosts, "every node of the allocation reported its provenance")
	assert.Empty(t, run.Manifest.Host.Nodes, "one node: the runner's own host is the manifest's host")
}

// TestTimeLimit: a rank that hangs past the trial's limit is ended by Slurm
// (srun --time), recorded as timeout in Slurm's words, and the sweep goes on.
func TestTimeLimit(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := study(t, "slurm-limit", "1m", "{fault.kind: hang, fault.rank: 1}", "{grad_accum: 1}")
	out := t.TempDir()
	// the heartbeat limit is long so that Slurm's time limit ends the step
	code, text := casestudy(t, ctx, []string{"salloc", "-n2", "-t", "6"}, "run", p, "--out", out, "--heartbeat-timeout", "10m")
	require.Equal(t, 1, code, "a trial timed out: exit status 1\n%s", text)
	trials := byIndex(onlyRun(t, out))
	require.Len(t, trials, 2, text)
	hung := trials[0]
	assert.Equal(t, store.Timeout, hung.Outcome, hung.Error)
	assert.Contains(t, hung.Error, "time limit")
	assert.Less(t, hung.Finished.Sub(hung.Started), 2*time.Minute+30*time.Second)
	assert.Equal(t, store.OK, trials[1].Outcome, "the next trial runs inside the same allocation: %s", trials[1].Error)
}

// TestRunnerKillsStep: the runner's own deadline (heartbeat silence) ends a
// step through scancel and srun, and the sweep goes on.
func TestRunnerKillsStep(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := study(t, "slurm-kill", "5m", "{fault.kind: hang, fault.rank: 0}", "{grad_accum: 1}")
	out := t.TempDir()
	code, text := casestudy(t, ctx, []string{"salloc", "-n2", "-t", "5"}, "run", p, "--out", out,
		"--heartbeat-timeout", "3s", "--kill-grace", "2s")
	require.Equal(t, 1, code, "a trial timed out: exit status 1\n%s", text)
	trials := byIndex(onlyRun(t, out))
	require.Len(t, trials, 2, text)
	hung := trials[0]
	assert.Equal(t, store.Timeout, hung.Outcome, hung.Error)
	assert.Contains(t, hung.Error, "rank 0 sent no heartbeat for 3s")
	assert.Less(t, hung.Finished.Sub(hung.Started), 45*time.Second, "killed within the grace periods")
	assert.Equal(t, store.OK, trials[1].Outcome, trials[1].Error)
}

// TestSubmit: --submit writes a batch script, sbatch runs the study, status
// follows it, and the run directory is one `casestudy report` reads.
func TestSubmit(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := study(t, "slurm-submit", "2m", "{grad_accum: 1}", "{grad_accum: 2}")
	// a space and a # in the path: #SBATCH --output must be quoted for Slurm
	out := filepath.Join(t.TempDir(), "out dir #1")
	code, text := casestudy(t, ctx, nil, "run", p, "--launcher", "slurm", "--submit", "--out", out, "--time", "5", "--partition", "debug")
	require.Equal(t, 0, code, text)
	require.Contains(t, text, "submitted Slurm job")
	var runDir string
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "results: "); ok {
			runDir = v
		}
	}
	require.NotEmpty(t, runDir, text)
	script, err := os.ReadFile(filepath.Join(runDir+".slurm", "job.sbatch"))
	require.NoError(t, err)
	assert.Contains(t, string(script), "#SBATCH --ntasks-per-node=2")
	assert.Contains(t, string(script), "#SBATCH --time=5")
	assert.Contains(t, string(script), "#SBATCH --partition=debug\n")
	assert.Contains(t, string(script), `#SBATCH --output="`+out+"/")

	var st struct {
		Done, Planned int
		JobState      string `json:"job_state"`
		JobID         string `json:"job_id"`
		Outcomes      map[string]int
	}
	for {
		code, text = casestudy(t, ctx, nil, "status", runDir, "--json")
		require.Equal(t, 0, code, text)
		require.NoError(t, json.Unmarshal([]byte(text), &st), text)
		if st.JobState != "PENDING" && st.JobState != "RUNNING" && st.JobState != "COMPLETING" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job still %s: %s", st.JobState, text)
		case <-time.After(time.Second):
		}
	}
	jobOut, _ := os.ReadFile(filepath.Join(runDir+".slurm", "job-"+st.JobID+".out"))
	require.Equal(t, "COMPLETED", st.JobState, "job output:\n%s", jobOut)
	assert.Equal(t, 2, st.Done)
	assert.Equal(t, 2, st.Planned)
	assert.Equal(t, map[string]int{"ok": 2}, st.Outcomes)

	code, text = casestudy(t, ctx, nil, "status", runDir)
	require.Equal(t, 0, code, text)
	assert.Contains(t, text, "trials: 2 of 2 done")
	assert.Contains(t, text, "COMPLETED")

	code, text = casestudy(t, ctx, nil, "report", runDir, "--format", "md,json", "--force") // the job wrote them once
	require.Equal(t, 0, code, text)
	assert.FileExists(t, filepath.Join(runDir, "report.md"))

	// submitted again (as a requeue does), the script resumes the run
	again, err := exec.CommandContext(ctx, "sbatch", "--wait", "--parsable", filepath.Join(runDir+".slurm", "job.sbatch")).CombinedOutput()
	require.NoError(t, err, "%s", again)
	recs, err := store.ReadTrials(filepath.Join(runDir, "trials.jsonl"))
	require.NoError(t, err)
	assert.Len(t, recs, 2, "no trial ran twice")
	id := strings.TrimSpace(string(again))
	jobOut, _ = os.ReadFile(filepath.Join(runDir+".slurm", "job-"+id+".out"))
	assert.Contains(t, string(jobOut), "trials: no trials", "job %s resumed a finished run", id)
}

// TestSubmitRefusesInjection: a launcher setting that would end its #SBATCH
// line and run a command in the batch script (issue 21, defect 1) is refused
// with exit status 2 by the real sbatch path, from the study or the flag, and
// nothing is written or submitted.
func TestSubmitRefusesInjection(t *testing.T) {
	needCluster(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker := filepath.Join(t.TempDir(), "pwned")
	p := study(t, "slurm-inject", "2m", "{grad_accum: 1}")
	text, err := os.ReadFile(p)
	require.NoError(t, err)
	hostile := filepath.Join(t.TempDir(), "hostile.yaml")
	require.NoError(t, os.WriteFile(hostile, append(text, []byte(fmt.Sprintf("launcher: {partition: \"debug\\ntouch %s\"}\n", marker))...), 0o644))
	out := t.TempDir()
	for _, args := range [][]string{
		{"run", hostile, "--launcher", "slurm", "--submit", "--out", out},
		{"run", p, "--launcher", "slurm", "--submit", "--out", out, "--partition", "debug\ntouch " + marker},
		{"validate", hostile},
	} {
		code, text := casestudy(t, ctx, nil, args...)
		assert.Equal(t, 2, code, text)
		assert.Contains(t, text, `"debug\ntouch `)
	}
	assert.NoFileExists(t, marker)
	entries, _ := os.ReadDir(out)
	assert.Empty(t, entries, "no run directory and no batch script")
}
