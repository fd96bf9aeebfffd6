package runner

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
	"github.com/casestudy/casestudy/timeline"
)

// TestOwnEnd: which ends after the runner's stop are a rank's own (and so
// outrank a peer's failed collective).
func TestOwnEnd(t *testing.T) {
	killed := time.Now()
	for _, tc := range []struct {
		desc     string
		launcher launch.Launcher
		ex       launch.Exit
		own      bool
	}{
		{"SIGABRT is never the runner's", launch.Local{}, launch.Exit{Signal: "SIGABRT", At: killed.Add(time.Minute)}, true},
		{"an exit status is the rank's", launch.Local{}, launch.Exit{Code: 1, At: killed.Add(time.Second)}, true},
		{"SIGTERM after the stop is the runner's", launch.Local{}, launch.Exit{Signal: "SIGTERM", At: killed.Add(time.Millisecond)}, false},
		{"SIGKILL before the runner's SIGKILL", launch.Local{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(time.Second)}, true},
		{"SIGKILL after the grace period", launch.Local{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(6 * time.Second)}, false},
		{"a scheduler's SIGKILL of a peer", verdictLauncher{}, launch.Exit{Signal: "SIGKILL", At: killed.Add(time.Second)}, false},
		{"a scheduler's verdict", verdictLauncher{}, launch.Exit{Signal: "SIGKILL", Outcome: "oom", At: killed.Add(time.Second)}, true},
	} {
		w := &watcher{o: &Options{Launcher: tc.launcher, KillGrace: 5 * time.Second}, killed: killed}
		assert.Equal(t, tc.own, w.ownEnd(tc.ex), tc.desc)
	}
	w := &watcher{o: &Options{Launcher: launch.Local{}, KillGrace: 5 * time.Second}}
	assert.True(t, w.ownEnd(launch.Exit{Signal: "SIGTERM"}), "before any stop every end is the rank's own")
}

type nopGroup struct{}

func (nopGroup) Exits() <-chan launch.Exit { return nil }
func (nopGroup) Kill(time.Duration)        {}

// TestCauseOrder: the first cause wins, except that a peer's failed
// collective gives way to the rank that ended by itself, and a reported
// signal to the scheduler's verdict (Slurm's time limit signals first).
func TestCauseOrder(t *testing.T) {
	newWatcher := func(l launch.Launcher) *watcher {
		w := &watcher{o: &Options{Launcher: l, KillGrace: 5 * time.Second}, sp: &trialSpec{Trial: study.Trial{ID: "t"}},
			group: nopGroup{}, start: time.Now()}
		for k := 0; k < 2; k++ {
			w.ranks = append(w.ranks, &rankState{lastStep: -1})
		}
		return w
	}
	ev := func(m rendezvous.Message) rendezvous.Event { return rendezvous.Event{At: time.Now(), Msg: m} }

	w := newWatcher(launch.Local{})
	w.event(ev(rendezvous.Message{Type: rendezvous.TypeError, Rank: 0, Status: rendezvous.StatusComm, Message: "gloo: connection closed"}))
	w.exit(launch.Exit{Rank: 0, Code: 1, At: time.Now()})
	w.exit(launch.Exit{Rank: 1, Code: -1, Signal: "SIGABRT", At: time.Now()})
	assert.Equal(t, 1, w.first.rank, w.first.msg)
	assert.Equal(t, "SIGABRT", w.first.signal)

	w = newWatcher(verdictLauncher{})
	w.event(ev(rendezvous.Message{Type: rendezvous.TypeSignal, Rank: 0, Signal: "SIGTERM"}))
	w.exit(launch.Exit{Rank: 0, Code: -1, Signal: "SIGTERM", Outcome: "timeout", Reason: "step cancelled at its time limit", At: time.Now()})
	assert.Equal(t, store.Timeout, w.first.outcome, w.first.msg)

	w = newWatcher(launch.Local{})
	w.event(ev(rendezvous.Message{Type: rendezvous.TypeError, Rank: 1, Status: "oom", Message: "out of memory"}))
	w.event(ev(rendezvous.Message{Type: rendezvous.TypeSignal, Rank: 0, Signal: "SIGTERM"}))
	w.exit(launch.Exit{Rank: 0, Code: -1, Signal: "SIGKILL", At: time.Now()})
	assert.Equal(t, store.OOM, w.first.outcome, "a rank's own error stays the cause")
}

// TestMeasuredWindowAcrossClocks: ranks on hosts whose clocks differ give the
// launch's window as their steps took it, on the runner's clock: each rank's
// marks move by its offset, the least receive-minus-send over its marks
// (audit, 2026-12-07: the window was the earliest rank's warm mark to the
// latest's measured mark, each on its own host's clock, so a node 5 s ahead
// added 5 s to every multi-node launch's window).
func TestMeasuredWindowAcrossClocks(t *testing.T) {
	w := &watcher{o: &Options{Launcher: launch.Local{}}, sp: &trialSpec{Trial: study.Trial{ID: "t"}}, group: nopGroup{}, start: time.Now()}
	for k := 0; k < 2; k++ {
		w.ranks = append(w.ranks, &rankState{lastStep: -1, marks: map[string]time.Time{}})
	}
	runner0 := time.Unix(1000, 0)
	ahead := 5 * time.Second // rank 1's host clock
	mark := func(rank int, name string, at time.Time, latency time.Duration) {
		own := at
		if rank == 1 {
			own = at.Add(ahead)
		}
		w.event(rendezvous.Event{At: at.Add(latency), Msg: rendezvous.Message{Type: rendezvous.TypeMark, Rank: rank, Name: name, At: own.UnixNano()}})
	}
	mark(0, timeline.MarkStarted, runner0, 300*time.Microsecond)
	mark(1, timeline.MarkStarted, runner0, 2*time.Millisecond)
	mark(1, timeline.MarkJoined, runner0.Add(time.Second), 200*time.Microsecond) // the least latency: the offset's estimate
	assert.Equal(t, -ahead+200*time.Microsecond, w.ranks[1].clockOff)
	assert.Equal(t, 300*time.Microsecond, w.ranks[0].clockOff)

	// The window's marks (set as the watcher keeps them, on each rank's clock).
	w.ranks[0].marks[timeline.MarkWarm] = runner0.Add(10 * time.Second)
	w.ranks[0].marks[timeline.MarkMeasured] = runner0.Add(12 * time.Second)
	w.ranks[1].marks[timeline.MarkWarm] = runner0.Add(10*time.Second + ahead)
	w.ranks[1].marks[timeline.MarkMeasured] = runner0.Add(12*time.Second + 100*time.Millisecond + ahead)
	from, to := measuredWindow(w.ranks)
	assert.InDelta(t, 2.1, to.Sub(from).Seconds(), 0.001, "the steps' 2.1 s, not 7.1 s")
}

// TestLastStepsAddsTheStepInProgress: a rank's completed-step count lags
// while one engine call runs all its measured steps; the step its trainer
// is in (its heartbeats' communication progress) is said beside it (audit,
// 2026-12-07: a hung rank 1 read ahead of the healthy rank 0, "rank0=1 rank1=2").
func TestLastStepsAddsTheStepInProgress(t *testing.T) {
	w := &watcher{ranks: []*rankState{{lastStep: 1}, {lastStep: 2}, {lastStep: 3}}}
	w.ranks[0].rec.Comm = &engine.CommProgress{Step: 5}
	w.ranks[1].rec.Comm = &engine.CommProgress{Step: 2}
	assert.Equal(t, "rank0=1 (in step 5) rank1=2 rank2=3", w.lastSteps())
}

// TestFixedRendezvousPort: with a fixed rendezvous port (--rdzv-addr
// HOST:PORT) no launch is prepared ahead, where a second listener would fail
// on every launch (audit, 2026-12-07: "bind: address already in use" for
// each launch under --overlap tail, before it fell back).
func TestFixedRendezvousPort(t *testing.T) {
	for addr, fixed := range map[string]bool{"127.0.0.1:29517": true, "127.0.0.1:0": false, "10.0.0.5:": false, "[::1]:29500": true, "": false} {
		r := &Runner{opts: Options{RendezvousAddr: addr}}
		assert.Equal(t, fixed, r.fixedRendezvousPort(), addr)
	}
}
