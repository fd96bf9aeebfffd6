package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// cause is what ended a launch early. The first one is the launch's cause;
// later failures (peers the runner killed) are not, with two exceptions: a
// collective that failed (weak: usually a peer's end seen from the other
// side) gives way to the rank that ended by itself (primary), whose end may
// be observed a moment later; and a signal a rank reported gives way to a
// scheduler's verdict (Slurm signals a step before it ends it for its time
// limit), which says why.
type cause struct {
	outcome   store.Outcome
	rank      int
	code      int
	signal    string
	msg       string
	weak      bool // a failed collective (status comm)
	primary   bool // a rank's own end or error, not the runner's doing
	reported  bool // a signal the rank reported
	scheduler bool // the scheduler's verdict on a rank's end

	outside bool  // a stop signal from outside (settle: an interruption when the runner stops too)
	halt    error // an environment fault: the sweep stops and --resume runs the trial again
}

type rankState struct {
	marks map[string]time.Time // timeline marks the worker sent, on its host's clock
	// clockOff is the smallest (runner's receive time - the rank's send
	// time) over its marks: its host clock's offset from the runner's plus
	// the least message latency. Added to a mark, it puts the mark on the
	// runner's clock, so that marks of ranks on different hosts compare
	// (measuredWindow); haveOff says whether a mark has been seen.
	clockOff  time.Duration
	haveOff   bool
	exit      time.Time // when the launcher saw it end
	lastSeen  time.Time
	lastStep  int
	done      bool
	errored   bool   // reported an error
	signalled string // reported the signal it ends by
	exited    bool
	rec       store.RankRecord
}

// watcher follows one launch: events from the ranks, their exits, the
// deadlines, and the runner's own signal.
type watcher struct {
	o      *Options
	l      *launchRun
	sp     *trialSpec
	rep    int
	group  launch.Group
	start  time.Time
	ranks  []*rankState
	first  *cause
	killed time.Time // when the runner stopped the launch (zero: not yet)
	oom    oomWatch
	// the measured window for the GPU sampler: open at the first rank's
	// start of its measured steps, closed when every rank ended them
	windowOpen   bool
	windowClosed int
	stepsDone    int // ranks whose steps (measured, then profiled) are done
}

// watch follows a launch until every rank ended and classifies it.
func (r *Runner) watch(ctx context.Context, l *launchRun) *repeatResult {
	sp, srv := l.sp, l.srv
	w := &watcher{o: &r.opts, l: l, sp: sp, rep: l.rep, group: l.group, start: time.Now(), oom: newOOMWatch(r.opts.OOMKills)}
	for k := 0; k < sp.Ranks; k++ {
		w.ranks = append(w.ranks, &rankState{lastSeen: w.start, lastStep: -1, marks: map[string]time.Time{},
			rec: store.RankRecord{Rank: k, GPU: sp.Devices[k], LastStep: -1}})
	}
	drain := func() {
		for {
			select {
			case ev := <-srv.Events():
				w.event(ev)
			default:
				return
			}
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	done := ctx.Done()
	for exits := l.group.Exits(); exits != nil; {
		select {
		case ev := <-srv.Events():
			w.event(ev)
		case ex, ok := <-exits:
			if !ok {
				exits = nil
				break
			}
			drain() // a rank's reports precede its exit
			w.exit(ex)
		case now := <-tick.C:
			w.deadlines(now)
		case <-done:
			done = nil
			w.fail(cause{outcome: store.Interrupted, rank: -1, msg: "stopped by a signal; --resume runs it again"})
		}
	}
	drain()
	w.settle(ctx)
	return w.result()
}

// fail records c (see cause for which one counts) and stops the launch:
// SIGTERM to every rank, SIGKILL after the grace period.
func (w *watcher) fail(c cause) {
	switch {
	case w.first == nil:
		w.first = &c
	case w.first.weak && c.primary, w.first.reported && c.scheduler, w.first.outside && c.outcome == store.Interrupted:
		w.first = &c
	}
	if w.killed.IsZero() {
		w.killed = time.Now()
	}
	w.group.Kill(w.o.KillGrace)
}

// event handles one message of a joined rank. Only these count as the rank's
// sign of life; a refused join speaks for no rank.
func (w *watcher) event(ev rendezvous.Event) {
	m := ev.Msg
	if m.Rank < 0 || m.Rank >= len(w.ranks) || m.Type == rendezvous.TypeRefused || m.Type == rendezvous.TypeLost {
		return
	}
	st := w.ranks[m.Rank]
	st.lastSeen = ev.At
	switch m.Type {
	case rendezvous.TypeHeartbeat:
		st.lastStep = max(st.lastStep, m.Step)
		if m.Progress != nil {
			st.rec.Comm = m.Progress
		}
	case rendezvous.TypeMark:
		st.marks[m.Name] = time.Unix(0, m.At)
		if d := ev.At.Sub(st.marks[m.Name]); !st.haveOff || d < st.clockOff {
			st.clockOff, st.haveOff = d, true
		}
		w.window(m.Name)
		w.steps(m.Name)
	case rendezvous.TypeInfo:
		w.rankInfo(st, m.Info)
	case rendezvous.TypeStep:
		if m.Metrics == nil {
			return
		}
		st.lastStep = max(st.lastStep, m.Metrics.Step)
		if m.Warmup {
			st.rec.WarmupSteps++
			st.rec.WarmupStepMS = append(st.rec.WarmupStepMS, m.Metrics.StepMS)
		} else {
			st.rec.Steps = append(st.rec.Steps, *m.Metrics)
		}
	case rendezvous.TypeChecksum:
		st.rec.Checksum = m.Checksum
	case rendezvous.TypeProfile:
		st.rec.Profile = m.Profile
		if p := m.Profile; p != nil && p.TraceBytes > 0 && p.TraceError == "" {
			p.Trace = store.TraceName(w.sp.Trial.ID, m.Rank, w.rep)
		}
	case rendezvous.TypeDone:
		st.done = true
	case rendezvous.TypeError:
		st.errored = true
		c := cause{outcome: outcomeOf(m.Status), rank: m.Rank, msg: m.Message, primary: true}
		if m.Status == rendezvous.StatusComm {
			c.weak, c.primary = true, false
		}
		if m.Status == StatusEnvironment {
			c.halt = fmt.Errorf("rank %d: %s", m.Rank, m.Message)
		}
		w.fail(c)
	case rendezvous.TypeSignal:
		st.signalled = m.Signal
		w.fail(cause{outcome: store.Crashed, rank: m.Rank, code: -1, signal: m.Signal, primary: w.killed.IsZero(), reported: true,
			outside: w.killed.IsZero() && isStopSignal(m.Signal),
			msg:     fmt.Sprintf("rank %d received %s from outside casestudy; see %s", m.Rank, m.Signal, store.LogName(w.sp.Trial.ID, m.Rank, w.rep))})
	}
}

// window tells the GPU sampler where the measured window begins (the first
// rank's start of its measured steps) and ends (the last rank's end of them).
func (w *watcher) window(mark string) {
	switch {
	case mark == timeline.MarkWarm && !w.windowOpen:
		w.windowOpen = true
		w.l.sampler.WindowStart()
	case mark == timeline.MarkMeasured:
		if w.windowClosed++; w.windowClosed == len(w.ranks) {
			w.l.sampler.WindowEnd()
		}
	}
}

// steps runs the launch's stepsDone once every rank's steps are done: its
// measured steps, and its profiled ones when it profiles (never the pre-heat).
func (w *watcher) steps(mark string) {
	last := timeline.MarkMeasured
	if w.sp.Launch.ProfileSteps > 0 && w.rep != store.PreheatRepeat {
		last = timeline.MarkProfiled
	}
	if mark != last {
		return
	}
	if w.stepsDone++; w.stepsDone == len(w.ranks) && w.l.stepsDone != nil {
		f := w.l.stepsDone
		w.l.stepsDone = nil
		f()
	}
}

// exit handles a rank's end: a cause unless the rank finished, reported
// its error, or reported the signal it ended by.
func (w *watcher) exit(ex launch.Exit) {
	st := w.ranks[ex.Rank]
	st.exited, st.exit = true, ex.At
	st.rec.ExitCode, st.rec.Signal = ex.Code, ex.Signal
	if ex.Node != "" {
		st.rec.Node = ex.Node
	}
	if ((ex.Code == 0 && !ex.Killed() && st.done) || st.errored || (st.signalled != "" && st.signalled == ex.Signal)) && ex.Outcome == "" {
		return
	}
	c := cause{outcome: store.Crashed, rank: ex.Rank, code: ex.Code, signal: ex.Signal, primary: w.ownEnd(ex)}
	c.outside = c.primary && ex.Killed() && isStopSignal(ex.Signal) && ex.Outcome == ""
	switch {
	case ex.Killed():
		c.msg = fmt.Sprintf("rank %d was killed by %s", ex.Rank, ex.Signal)
	case ex.Code == 0:
		c.msg = fmt.Sprintf("rank %d exited with code 0 before finishing", ex.Rank)
	default:
		c.msg = fmt.Sprintf("rank %d exited with code %d", ex.Rank, ex.Code)
	}
	if ex.Err != nil {
		c.msg += ": " + ex.Err.Error()
	}
	if ex.Signal == "SIGKILL" && c.primary {
		if why := w.oom.killed(); why != "" { // the kernel's OOM killer, not an error the engine could report
			c.outcome, c.msg = store.OOM, c.msg+": "+why
		}
	}
	if ex.Outcome != "" { // the scheduler ended it (Slurm: time limit, OOM, node failure)
		c.outcome, c.msg, c.scheduler = store.Outcome(ex.Outcome), ex.Reason, true
		if c.outcome == store.Timeout {
			c.msg += fmt.Sprintf(" (last completed steps: %s)", w.lastSteps())
		}
	}
	c.msg += "; see " + store.LogName(w.sp.Trial.ID, ex.Rank, w.rep)
	w.fail(c)
}

// ownEnd says whether a rank ended by itself rather than by the runner's
// stop, which sends SIGTERM and, after the grace period, SIGKILL; nothing
// else. A rank the runner stops ends by that signal (endBySignal). Only the
// local launcher sees each end as it happens; a scheduler (Slurm's
// --kill-on-bad-exit) ends peers with the same signals and reports the ends
// later, so there SIGTERM and SIGKILL after the stop are never the rank's own.
func (w *watcher) ownEnd(ex launch.Exit) bool {
	if w.killed.IsZero() || ex.Outcome != "" {
		return true
	}
	_, local := w.o.Launcher.(launch.Local)
	switch ex.Signal {
	case "SIGTERM":
		return false
	case "SIGKILL":
		return local && ex.At.Before(w.killed.Add(w.o.KillGrace))
	}
	return true
}

// deadlines stops a launch past its timeout or with a rank silent past the
// heartbeat limit.
func (w *watcher) deadlines(now time.Time) {
	if w.o.Timeout > 0 && now.Sub(w.start) > launch.DeadlineFor(w.o.Launcher, w.o.Timeout) {
		w.fail(cause{outcome: store.Timeout, rank: -1,
			msg: fmt.Sprintf("trial exceeded its timeout of %s (last completed steps: %s)", w.o.Timeout, w.lastSteps())})
		return
	}
	for k, st := range w.ranks {
		if !st.exited && !st.done && !st.errored && now.Sub(st.lastSeen) > w.o.HeartbeatLimit {
			w.fail(cause{outcome: store.Timeout, rank: k,
				msg: fmt.Sprintf("rank %d sent no heartbeat for %s (last completed steps: %s)", k, w.o.HeartbeatLimit, w.lastSteps())})
			return
		}
	}
}

// result classifies the launch once every rank ended.
func (w *watcher) result() *repeatResult {
	res := &repeatResult{FailedRank: -1}
	res.Rec.Outcome = store.OK
	if c := w.first; c != nil {
		res.Rec.Outcome, res.Rec.Error = c.outcome, c.msg
		res.FailedRank, res.ExitCode, res.Signal = c.rank, c.code, c.signal
		res.halt = c.halt
	}
	for _, st := range w.ranks {
		st.rec.LastStep = st.lastStep
		res.Rec.Ranks = append(res.Rec.Ranks, st.rec)
	}
	// A hang or a failed collective: name the rank the others wait for; it,
	// not the rank whose collective gave up, is the one that failed.
	if c := w.first; c != nil && (c.weak || c.outcome == store.Timeout) {
		if rank, why := behind(res.Rec.Ranks); why != "" {
			res.Rec.Error += "; communication: " + why
			if rank >= 0 && (c.weak || c.rank < 0) {
				res.FailedRank = rank
			}
		}
	}
	if res.Rec.Outcome == store.OK {
		if msg := checksumsDisagree(w.sp, res.Rec.Ranks); msg != "" {
			res.Rec.Outcome, res.Rec.Error = store.Failed, msg
		}
	}
	if res.Rec.Outcome == store.OK {
		splitBucketSkew(res.Rec.Ranks)
		res.Rec.SamplesPerS, res.Rec.TokensPerS = measure.Throughput(res.Rec.Ranks)
		res.Rec.Summary = measure.SummarizeRepeat(&res.Rec)
	}
	res.ranks = w.ranks
	return res
}

// lastSteps is each rank's last completed step, for the timeout messages.
// A rank reports a completed step after a whole engine call, which runs all
// its measured steps at once, so its count lags while it trains; the step
// its trainer is in, from the communication progress of its last heartbeat
// (ranks that communicate), is added where it is further on: "rank0=1 (in
// step 5)".
func (w *watcher) lastSteps() string {
	parts := make([]string, len(w.ranks))
	for k, st := range w.ranks {
		parts[k] = fmt.Sprintf("rank%d=%d", k, st.lastStep)
		if p := st.rec.Comm; p != nil && p.Step > int64(st.lastStep) {
			parts[k] += fmt.Sprintf(" (in step %d)", p.Step)
		}
	}
	return strings.Join(parts, " ")
}

// outcomeOf maps a worker's error status to an outcome (a failed collective
// is failed).
func outcomeOf(status string) store.Outcome {
	switch store.Outcome(status) {
	case store.OOM, store.Unsupported, store.Failed:
		return store.Outcome(status)
	}
	return store.Failed
}
