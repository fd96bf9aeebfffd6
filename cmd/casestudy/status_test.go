package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/store"
)

// TestStatus reads a run in progress: trials done of planned, outcomes, the
// trial in flight while the run's writer lock is held; the same run once its
// process died (kill -9: the kernel released the lock): stopped, no trial in
// flight, no ETA, the resume command; and a submitted run whose job Slurm
// cannot be asked about.
func TestStatus(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no squeue/scontrol/sacct: the job's state is unknown
	out := t.TempDir()
	w, err := store.Create(out, "demo", "20260102T030405Z-abcdef", &store.Manifest{Schema: store.SchemaVersion, RunID: "20260102T030405Z-abcdef", Study: "demo",
		Created: time.Now().Add(-time.Minute),
		Plan:    []store.PlannedTrial{{ID: "aaaa"}, {ID: "bbbb", Index: 1}, {ID: "cccc", Index: 2}},
		Dropped: []store.DroppedTrial{{Reason: "constraint"}}})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.Append(&store.TrialRecord{ID: "skipped-1", Index: -1, Outcome: store.Skipped, FailedRank: -1}))
	require.NoError(t, w.Append(&store.TrialRecord{ID: "aaaa", Outcome: store.OK, FailedRank: -1}))
	require.NoError(t, w.Append(&store.TrialRecord{ID: "bbbb", Index: 1, Outcome: store.Crashed, Error: "rank 1 exited with code 1", FailedRank: 1}))
	for _, id := range []string{"aaaa", "bbbb", "cccc"} { // two launches done, one started
		f, err := w.CreateLog(id, 0, 0)
		require.NoError(t, err)
		f.Close()
	}
	dir := w.Dir

	// running: the writer (w) holds the run's lock
	code, stdout, stderr := runCLI(t, "status", dir)
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{"study: demo", "trials: 2 of 3 done (1 more dropped by the planner)",
		"outcomes: 1 crashed, 1 ok, 1 skipped", "last: trial bbbb crashed: rank 1 exited with code 1", "in flight: trial cccc",
		"ETA", "running: casestudy pid"} {
		assert.Contains(t, stdout, want)
	}
	assert.NotContains(t, stdout, "finished;")
	assert.NotContains(t, stdout, "resume with")

	// the writer died (its lock released) with trial cccc started
	require.NoError(t, w.Close())
	code, stdout, stderr = runCLI(t, "status", dir)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stdout, "in flight")
	assert.NotContains(t, stdout, "ETA", "a run that is not running has no ETA")
	assert.NotContains(t, stdout, "finished;")
	assert.Contains(t, stdout, "unfinished: trial cccc")
	assert.Contains(t, stdout, "stopped: no process holds the run's writer lock (killed or crashed) with 2 of 3 trials done; resume with: ")
	assert.Contains(t, stdout, " run --resume "+dir)
	code, stdout, stderr = runCLI(t, "status", dir, "--json")
	require.Equal(t, 0, code, stderr)
	var stopped runStatus
	require.NoError(t, json.Unmarshal([]byte(stdout), &stopped))
	assert.Equal(t, "stopped", stopped.State)
	assert.Empty(t, stopped.InFlight)
	assert.Equal(t, "cccc", stopped.Unfinished)
	assert.Contains(t, stopped.Resume, "--resume")
	assert.Zero(t, stopped.Progress.ETA)

	// submitted, not started: only the submission folder exists
	pending := filepath.Join(out, "demo", "20260102T040000Z-123456")
	require.NoError(t, os.MkdirAll(pending+".slurm", 0o755))
	sub, _ := json.Marshal(launch.Submission{JobID: "77", RunDir: pending, Output: pending + ".slurm/job.out"})
	require.NoError(t, os.WriteFile(filepath.Join(pending+".slurm", "job.json"), sub, 0o644))
	code, stdout, stderr = runCLI(t, "status", pending+".slurm", "--json")
	require.Equal(t, 0, code, stderr)
	var st runStatus
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	assert.Equal(t, pending, st.RunDir)
	assert.False(t, st.Started)
	assert.Equal(t, "77", st.JobID)
	assert.Empty(t, st.JobState)
	assert.Contains(t, st.StateErr, "job 77")

	code, _, stderr = runCLI(t, "status", t.TempDir())
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "is not a run directory")

	// a bad line inside trials.jsonl is bad input, named by file and line
	trials := filepath.Join(dir, "trials.jsonl")
	b, err := os.ReadFile(trials)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(trials, append([]byte("not json\n"), b...), 0o644))
	code, _, stderr = runCLI(t, "status", dir)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "trials.jsonl:1:")
}

func TestJobOver(t *testing.T) {
	for state, over := range map[string]bool{"PENDING": false, "RUNNING": false, "COMPLETING": false, "": false,
		"COMPLETED": true, "FAILED": true, "TIMEOUT": true, "CANCELLED by 0": true, "NODE_FAIL": true, "OUT_OF_MEMORY": true} {
		assert.Equal(t, over, jobOver(state), state)
	}
}

// TestStatusInterruptedNotDone: after SIGTERM the interrupted trial is not done
// (it runs again on --resume) and a run that is not running has no ETA.
func TestStatusInterruptedNotDone(t *testing.T) {
	w, err := store.Create(t.TempDir(), "demo", "20260102T030405Z-abcdef", &store.Manifest{Schema: store.SchemaVersion,
		RunID: "20260102T030405Z-abcdef", Study: "demo", Created: time.Now().Add(-time.Minute),
		Plan: []store.PlannedTrial{{ID: "aaaa"}, {ID: "bbbb", Index: 1}, {ID: "cccc", Index: 2}}})
	require.NoError(t, err)
	require.NoError(t, w.Append(&store.TrialRecord{ID: "aaaa", Outcome: store.OK, FailedRank: -1}))
	require.NoError(t, w.Append(&store.TrialRecord{ID: "bbbb", Index: 1, Outcome: store.Interrupted, FailedRank: -1,
		Error: "stopped by a signal; --resume runs it again"}))
	for _, id := range []string{"aaaa", "bbbb"} {
		f, err := w.CreateLog(id, 0, 0)
		require.NoError(t, err)
		f.Close()
	}
	require.NoError(t, w.Close())

	code, stdout, stderr := runCLI(t, "status", w.Dir)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "trials: 1 of 3 done\n")
	assert.Contains(t, stdout, "outcomes: 1 interrupted, 1 ok")
	assert.Contains(t, stdout, "interrupted (1 trial(s)); resume with: ")
	assert.NotContains(t, stdout, "ETA")
	assert.NotContains(t, stdout, "in flight")
	code, stdout, stderr = runCLI(t, "status", w.Dir, "--json")
	require.Equal(t, 0, code, stderr)
	var st runStatus
	require.NoError(t, json.Unmarshal([]byte(stdout), &st))
	assert.Equal(t, 1, st.Done)
	assert.Equal(t, "interrupted", st.State)
	assert.Zero(t, st.Progress.ETA)
}
