package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

func signalWatcher(o *Options) *watcher {
	w := &watcher{o: o, sp: &trialSpec{Trial: study.Trial{ID: "t"}}, group: nopGroup{}, start: time.Now()}
	for k := 0; k < 2; k++ {
		w.ranks = append(w.ranks, &rankState{lastStep: -1})
	}
	return w
}

// TestOutsideStopSignalIsAnInterruption (audit N1, G-1..4, SL-6/8): a rank
// that reports SIGTERM from outside while the runner is stopped too (a
// preemption signals both) is an interruption, whichever the runner sees
// first; the same report with the runner still running is the rank's crash;
// a scheduler that says the allocation ends makes it an interruption that
// stops the sweep.
func TestOutsideStopSignalIsAnInterruption(t *testing.T) {
	defer func(d time.Duration) { stopWait = d }(stopWait)
	stopWait = 300 * time.Millisecond
	ev := func(m rendezvous.Message) rendezvous.Event { return rendezvous.Event{At: time.Now(), Msg: m} }
	signalled := func(w *watcher, sig string) {
		w.event(ev(rendezvous.Message{Type: rendezvous.TypeSignal, Rank: 1, Signal: sig}))
		w.exit(launch.Exit{Rank: 1, Code: -1, Signal: sig, At: time.Now()})
		w.exit(launch.Exit{Rank: 0, Code: -1, Signal: "SIGTERM", At: time.Now()})
	}
	for _, sig := range []string{"SIGTERM", "SIGINT", "SIGHUP"} {
		// the rank's report first, the runner's stop a moment later
		ctx, cancel := context.WithCancel(context.Background())
		w := signalWatcher(&Options{Launcher: launch.Local{}, KillGrace: time.Second})
		signalled(w, sig)
		time.AfterFunc(50*time.Millisecond, cancel)
		w.settle(ctx)
		assert.Equal(t, store.Interrupted, w.first.outcome, sig+": "+w.first.msg)

		// the runner's stop seen first: the rank's report does not replace it
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		w = signalWatcher(&Options{Launcher: launch.Local{}, KillGrace: time.Second})
		w.fail(cause{outcome: store.Interrupted, rank: -1, msg: "stopped by a signal"})
		signalled(w, sig)
		w.settle(ctx)
		assert.Equal(t, store.Interrupted, w.first.outcome, sig)
	}

	// the rank alone: its crash
	w := signalWatcher(&Options{Launcher: launch.Local{}, KillGrace: time.Second})
	signalled(w, "SIGTERM")
	w.settle(context.Background())
	assert.Equal(t, store.Crashed, w.first.outcome, w.first.msg)
	assert.Equal(t, 1, w.first.rank)

	// the rank alone, but the scheduler says the allocation ends (scancel of an allocation)
	w = signalWatcher(&Options{Launcher: verdictLauncher{}, KillGrace: time.Second,
		AllocationEnded: func() string { return "Slurm job 7 is CANCELLED (squeue)" }})
	signalled(w, "SIGTERM")
	w.settle(context.Background())
	assert.Equal(t, store.Interrupted, w.first.outcome, w.first.msg)
	assert.Contains(t, w.first.msg, "CANCELLED")
	require.Error(t, w.first.halt, "the sweep stops")

	// a step Slurm could not start in an allocation that has ended
	w = signalWatcher(&Options{Launcher: verdictLauncher{}, KillGrace: time.Second,
		AllocationEnded: func() string { return "Slurm job 7 is CANCELLED (scontrol)" }})
	w.exit(launch.Exit{Rank: 0, Code: 1, Outcome: "failed", Reason: "srun could not start a step in job 7", At: time.Now()})
	w.settle(context.Background())
	assert.Equal(t, store.Interrupted, w.first.outcome, w.first.msg)
	require.Error(t, w.first.halt)

	// a step cancelled for preemption, whatever Slurm says of the job now
	w = signalWatcher(&Options{Launcher: verdictLauncher{}, KillGrace: time.Second, AllocationEnded: func() string { return "" }})
	w.exit(launch.Exit{Rank: 0, Code: -1, Signal: "SIGKILL", Outcome: "failed", Reason: "Slurm cancelled job 7 on node1: preemption", At: time.Now()})
	w.settle(context.Background())
	assert.Equal(t, store.Interrupted, w.first.outcome, w.first.msg)
	require.Error(t, w.first.halt)

	// a step Slurm failed for another reason while the job runs: the trial's failure
	w = signalWatcher(&Options{Launcher: verdictLauncher{}, KillGrace: time.Second, AllocationEnded: func() string { return "" }})
	w.exit(launch.Exit{Rank: 0, Code: 1, Outcome: "failed", Reason: "Slurm reported a node failure on node1", At: time.Now()})
	w.settle(context.Background())
	assert.Equal(t, store.Failed, w.first.outcome, w.first.msg)
}

// TestPreemptionThenResume (audit N1, G-1): SIGTERM to the runner process
// and every worker at once, as systemd, scancel and Slurm preemption send
// it. The trial in flight is recorded interrupted, never crashed, and
// --resume runs it again: every trial exactly once, all ok.
func TestPreemptionThenResume(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			f := newFixture(t, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1, 2, 3]", "steps: 2", "steps: 400",
				"ranks: 1", "ranks: 2", "repeats: 2", "repeats: 1", "interleave: true", "interleave: false").Replace(repeatStudy))
			require.NoError(t, f.w.Close(), "the runner process below writes the run")
			exe, _ := os.Executable()
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), roleEnv+"=runner", "CASESTUDY_TEST_DIR="+f.dir, "CASESTUDY_TEST_RUN="+f.w.Dir)
			require.NoError(t, cmd.Start())
			marker := "CASESTUDY_TEST_RUN=" + f.w.Dir
			var workers []int
			require.Eventually(t, func() bool {
				workers = processesWith(marker, cmd.Process.Pid)
				return len(workers) == 2 && stepping(f.w.Dir)
			}, 30*time.Second, 10*time.Millisecond)
			// at once: the runner and both ranks
			_ = cmd.Process.Signal(sig)
			for _, pid := range workers {
				_ = syscall.Kill(pid, sig)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v", err)
			assert.Equal(t, fakeRunnerInterrupted, ee.ExitCode())
			recs, err := store.ReadTrials(filepath.Join(f.w.Dir, "trials.jsonl"))
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			for _, r := range recs {
				assert.NotEqual(t, store.Crashed, r.Outcome, r.Error)
			}
			assert.Equal(t, store.Interrupted, recs[len(recs)-1].Outcome, recs[len(recs)-1].Error)

			resumed := resume(t, f)
			ids := map[string]int{}
			for _, tr := range resumed.Trials {
				if tr.Outcome != store.Interrupted {
					ids[tr.ID]++
					assert.Equal(t, store.OK, tr.Outcome, tr.Error)
				}
			}
			for _, tr := range f.plan.Trials {
				assert.Equal(t, 1, ids[tr.ID], "trial %s exactly once", tr.ID)
			}
		})
	}
}

// stepping says whether a rank log of the run shows measured steps (the
// launch is well inside its steps).
func stepping(dir string) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*", "*"))
	return len(logs) > 0
}

// processesWith lists the processes other than except whose environment
// holds marker.
func processesWith(marker string, except int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(b), marker+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

// TestEnvironmentFaultStopsTheSweep (audit N7, S-3/S-4/E-10): an
// infrastructure failure after every retry (here: the worker program is
// gone) stops the sweep with exit status 3; the cut trial is recorded
// interrupted, the others are not run, and --resume runs them all.
func TestEnvironmentFaultStopsTheSweep(t *testing.T) {
	f := newFixture(t, strings.Replace(repeatStudy, "repeats: 2", "repeats: 1", 1))
	o := f.options()
	o.Executable = filepath.Join(t.TempDir(), "no-such-casestudy")
	o.Retries = 1
	run, err := f.run(t, context.Background(), o)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
	require.Len(t, run.Trials, 1)
	assert.Equal(t, store.Interrupted, run.Trials[0].Outcome)
	assert.Equal(t, 2, run.Trials[0].Attempts)
	assert.Contains(t, run.Trials[0].Error, "infrastructure")

	resumed := resume(t, f)
	ok := 0
	for _, tr := range resumed.Trials {
		if tr.Outcome == store.OK {
			ok++
		}
	}
	assert.Equal(t, len(f.plan.Trials), ok)
}

// TestOutsideAbortOfARankIsItsSignal (audit N16, G-13): SIGABRT, SIGSEGV or
// SIGQUIT sent to a rank from outside is recorded as that signal on that
// rank, not as "exited with code 2" (Go's runtime handler).
func TestOutsideAbortOfARankIsItsSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGQUIT} {
		t.Run(sig.String(), func(t *testing.T) {
			f := newFixture(t, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1]", "steps: 2", "steps: 2000",
				"ranks: 1", "ranks: 2", "repeats: 2", "repeats: 1").Replace(repeatStudy))
			o := f.options()
			mark := "CASESTUDY_TEST_MARK=" + f.dir
			o.Env = append(o.Env, mark)
			go func() {
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					for _, pid := range processesWith(mark, -1) {
						if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ")); strings.Contains(string(b), "\x00CASESTUDY_RANK=1\x00") &&
							workerStarted(f.w.Dir, 1) {
							time.Sleep(300 * time.Millisecond) // inside RunWorker, its signals caught
							_ = syscall.Kill(pid, sig)
							return
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			require.Len(t, run.Trials, 1)
			tr := run.Trials[0]
			assert.Equal(t, store.Crashed, tr.Outcome, tr.Error)
			assert.Equal(t, 1, tr.FailedRank, tr.Error)
			assert.Equal(t, unixSignalName(sig), tr.Signal, tr.Error)
		})
	}
}

func unixSignalName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGABRT: "SIGABRT", syscall.SIGSEGV: "SIGSEGV", syscall.SIGQUIT: "SIGQUIT"}[sig]
}

// breakLogsAt replaces the run's logs folder by a file when the n-th launch
// is about to start: the storage fault of a results folder turned read-only
// or out of inodes mid-sweep, injected without privileges (root ignores
// permission bits).
type breakLogsAt struct {
	nopProgress
	n, seen int
	dir     string
}

func (b *breakLogsAt) TrialStart(n, total int, rec *store.TrialRecord, rep, reps int) {
	if b.seen++; b.seen == b.n {
		_ = os.RemoveAll(filepath.Join(b.dir, "logs"))
		_ = os.WriteFile(filepath.Join(b.dir, "logs"), []byte("not a folder"), 0o644)
	}
}

// TestStorageFaultMidSweepStopsForResume (audit N7, S-3/S-4): the run's
// storage refuses new files mid-sweep; the sweep stops with exit status 3,
// the trial it cut is recorded interrupted and the rest are not run; once
// the storage is back, --resume runs every one of them.
func TestStorageFaultMidSweepStopsForResume(t *testing.T) {
	f := newFixture(t, strings.NewReplacer("micro_batch: [1, 2]", "micro_batch: [1, 2, 3, 4]", "repeats: 2", "repeats: 1").Replace(repeatStudy))
	o := f.options()
	o.Progress = &breakLogsAt{n: 2, dir: f.w.Dir}
	run, err := f.run(t, context.Background(), o)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
	outcomes := map[store.Outcome]int{}
	for _, tr := range run.Trials {
		outcomes[tr.Outcome]++
	}
	assert.Equal(t, map[store.Outcome]int{store.OK: 1, store.Interrupted: 1}, outcomes)

	require.NoError(t, os.Remove(filepath.Join(f.w.Dir, "logs")))
	resumed := resume(t, f)
	ok := map[string]bool{}
	for _, tr := range resumed.Trials {
		if tr.Outcome == store.OK {
			ok[tr.ID] = true
		}
	}
	assert.Len(t, ok, len(f.plan.Trials))
}

// goneLibrary is an engine library path the fake worker cannot open.
const goneLibrary = "replaced-by-another-abi.so"

// TestEngineLibraryGoneStopsTheSweep (audit N7, E-10): the engine library
// replaced mid-run by one the ranks cannot load is the machine's fault: the
// sweep stops with exit status 3 and the cut trial is recorded interrupted,
// not every remaining trial failed.
func TestEngineLibraryGoneStopsTheSweep(t *testing.T) {
	f := newFixture(t, strings.Replace(repeatStudy, "repeats: 2", "repeats: 1", 1))
	o := f.options()
	o.Machine.EngineLib = goneLibrary
	run, err := f.run(t, context.Background(), o)
	require.Error(t, err)
	assert.Equal(t, exitcode.Environment, exitcode.Of(err), err.Error())
	require.Len(t, run.Trials, 1, "the sweep stopped at the first")
	assert.Equal(t, store.Interrupted, run.Trials[0].Outcome)
	assert.Contains(t, run.Trials[0].Error, "ABI")
}

// workerStarted says whether the fake worker of rank has reached RunWorker
// (its log has the lines fakeWorkerMain prints just before).
func workerStarted(dir string, rank int) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*", fmt.Sprintf("rank%d.*", rank)))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "env NCCL_DEBUG_SUBSYS=") {
			return true
		}
	}
	return false
}
