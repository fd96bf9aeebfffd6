package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// repeatResult is one launch of a trial, classified.
type repeatResult struct {
	Rec        store.RepeatRecord
	FailedRank int // first failing rank, -1 none
	ExitCode   int
	Signal     string
	Throttled  bool // tainted by thermal or hardware slowdown in the measured window
	ranks      []*rankState
}

// cause is the first thing that ended a launch early; later failures (peers
// the runner killed) are not causes.
type cause struct {
	outcome store.Outcome
	rank    int
	code    int
	signal  string
	msg     string
}

type rankState struct {
	marks    map[string]time.Time // timeline marks the worker sent
	exit     time.Time
	lastSeen time.Time
	lastStep int
	done     bool
	errored  bool
	exited   bool
	rec      store.RankRecord
}

// infraError is a failure of the machinery (rendezvous, launch), not of the
// trial: it may be retried.
type infraError struct{ err error }

func (e *infraError) Error() string { return "infrastructure: " + e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// runRepeat runs one repeat of a trial: the launch prepared for it while
// the previous one ran, or a fresh one. When the batch named an upcoming
// launch (overlap), that one is prepared as soon as this one has started. It
// watches the launch until every rank has ended (the runner owns the
// deadlines: trial timeout, heartbeat silence; it kills the whole group on
// the first failure).
func (r *Runner) runRepeat(ctx context.Context, sp *trialSpec, rep int) (*repeatResult, error) {
	next := r.upcoming
	r.upcoming = nil
	l := r.takePrepared(sp, rep)
	if l == nil {
		var err error
		if l, err = r.startLaunch(ctx, sp, rep, true); err != nil {
			return nil, err
		}
	}
	defer l.close()
	if next != nil {
		nl, err := r.startLaunch(ctx, next.spec, next.rep, false)
		if err != nil {
			r.logf("trial %s repeat %d: preparing it ahead: %v (it starts after this launch)", next.spec.Trial.ID, next.rep, err)
		} else {
			r.prepared = nl
		}
	}
	res := r.watch(ctx, l)
	r.collect(l, res, r.prepared)
	return res, nil
}

// nextLaunch is the launch to prepare while the current one runs.
type nextLaunch struct {
	spec *trialSpec
	rep  int
}

// takePrepared returns the launch prepared ahead for (sp, rep), released,
// and discards a prepared launch that is not wanted any more (its trial
// stopped early, or the run is stopping).
func (r *Runner) takePrepared(sp *trialSpec, rep int) *launchRun {
	l := r.prepared
	r.prepared = nil
	if l == nil {
		return nil
	}
	if l.sp != sp || l.rep != rep {
		l.close()
		return nil
	}
	l.release(r)
	return l
}

// discardPrepared ends a launch prepared for nothing.
func (r *Runner) discardPrepared() {
	if r.prepared != nil {
		r.prepared.close()
		r.prepared = nil
	}
}

// watch follows a launch until every rank ended and classifies it.
func (r *Runner) watch(ctx context.Context, l *launchRun) *repeatResult {
	o := &r.opts
	sp, rep, srv, group := l.sp, l.rep, l.srv, l.group
	start := time.Now()
	ranks := make([]*rankState, sp.Ranks)
	for k := range ranks {
		ranks[k] = &rankState{lastSeen: start, lastStep: -1, marks: map[string]time.Time{},
			rec: store.RankRecord{Rank: k, GPU: sp.Devices[k], LastStep: -1}}
	}
	windowOpen, windowClosed := false, 0 // the measured window: the first rank's start, the last rank's end
	var first *cause
	fail := func(c cause) {
		if first == nil {
			first = &c
		}
		group.Kill(o.KillGrace)
	}
	handle := func(ev rendezvous.Event) {
		m := ev.Msg
		if m.Rank < 0 || m.Rank >= len(ranks) {
			return
		}
		st := ranks[m.Rank]
		st.lastSeen = ev.At
		switch m.Type {
		case rendezvous.TypeHeartbeat:
			st.lastStep = max(st.lastStep, m.Step)
		case rendezvous.TypeMark:
			st.marks[m.Name] = time.Unix(0, m.At)
			switch {
			case m.Name == timeline.MarkWarm && !windowOpen:
				windowOpen = true
				l.sampler.WindowStart()
			case m.Name == timeline.MarkMeasured:
				if windowClosed++; windowClosed == len(ranks) {
					l.sampler.WindowEnd()
				}
			}
		case rendezvous.TypeInfo:
			st.rec.Info = m.Info
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
		case rendezvous.TypeDone:
			st.done = true
		case rendezvous.TypeError:
			st.errored = true
			fail(cause{outcome: outcomeOf(m.Status), rank: m.Rank, msg: m.Message})
		}
	}
	drain := func() {
		for {
			select {
			case ev := <-srv.Events():
				handle(ev)
			default:
				return
			}
		}
	}

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	done := ctx.Done()
	exits := group.Exits()
	for exits != nil {
		select {
		case ev := <-srv.Events():
			handle(ev)
		case ex, ok := <-exits:
			if !ok {
				exits = nil
				break
			}
			drain() // an error report precedes its rank's exit
			st := ranks[ex.Rank]
			st.exited, st.exit = true, ex.At
			st.rec.ExitCode, st.rec.Signal = ex.Code, ex.Signal
			if ex.Node != "" {
				st.rec.Node = ex.Node
			}
			if (ex.Code == 0 && !ex.Killed() && st.done) || st.errored {
				break
			}
			c := cause{outcome: store.Crashed, rank: ex.Rank, code: ex.Code, signal: ex.Signal}
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
			if ex.Outcome != "" { // the scheduler ended it (Slurm: time limit, OOM, node failure)
				c.outcome, c.msg = store.Outcome(ex.Outcome), ex.Reason
				if c.outcome == store.Timeout {
					c.msg += fmt.Sprintf(" (last completed steps: %s)", lastSteps(ranks))
				}
			}
			c.msg += "; see " + store.LogName(sp.Trial.ID, ex.Rank, rep)
			fail(c)
		case <-tick.C:
			now := time.Now()
			if o.Timeout > 0 && now.Sub(start) > launch.DeadlineFor(o.Launcher, o.Timeout) {
				fail(cause{outcome: store.Timeout, rank: -1,
					msg: fmt.Sprintf("trial exceeded its timeout of %s (last completed steps: %s)", o.Timeout, lastSteps(ranks))})
				continue
			}
			for k, st := range ranks {
				if !st.exited && !st.done && !st.errored && now.Sub(st.lastSeen) > o.HeartbeatLimit {
					fail(cause{outcome: store.Timeout, rank: k,
						msg: fmt.Sprintf("rank %d sent no heartbeat for %s (last completed steps: %s)", k, o.HeartbeatLimit, lastSteps(ranks))})
					break
				}
			}
		case <-done:
			done = nil
			fail(cause{outcome: store.Interrupted, rank: -1, msg: "stopped by a signal; --resume runs it again"})
		}
	}
	drain()

	res := &repeatResult{FailedRank: -1}
	res.Rec.Outcome = store.OK
	if first != nil {
		res.Rec.Outcome, res.Rec.Error = first.outcome, first.msg
		res.FailedRank, res.ExitCode, res.Signal = first.rank, first.code, first.signal
	}
	for _, st := range ranks {
		st.rec.LastStep = st.lastStep
		res.Rec.Ranks = append(res.Rec.Ranks, st.rec)
	}
	if res.Rec.Outcome == store.OK {
		if msg := checksumsDisagree(sp, res.Rec.Ranks); msg != "" {
			res.Rec.Outcome, res.Rec.Error = store.Failed, msg
		}
	}
	if res.Rec.Outcome == store.OK {
		res.Rec.SamplesPerS, res.Rec.TokensPerS = stats.Throughput(res.Rec.Ranks)
		res.Rec.Summary = stats.SummarizeRepeat(&res.Rec)
	}
	res.ranks = ranks
	return res
}

// mpsLogName is where a launch's MPS control log is kept.
func mpsLogName(trialID string, rep int) string {
	return filepath.Join(filepath.Dir(store.LogName(trialID, 0, rep)), fmt.Sprintf("mps-control.r%d.log", rep))
}

// freePort asks the kernel for a free TCP port on host (for c10d's TCPStore,
// which rank 0 serves).
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the Gloo store: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// checksumsDisagree compares the parameter checksums of the ranks of one
// data-parallel world (no pipeline stages): after the same all-reduced updates
// they must be identical; a difference means wrong reductions (e.g. a forced
// NCCL protocol that sums wrongly).
func checksumsDisagree(sp *trialSpec, ranks []store.RankRecord) string {
	c := sp.Configs[0]
	if c.Dist.WorldSize < 2 || c.Pipeline.Stages > 1 || len(ranks) < 2 {
		return ""
	}
	ref := ranks[0].Checksum
	for _, r := range ranks[1:] {
		if ref == nil || r.Checksum == nil {
			return ""
		}
		if r.Checksum.Hash != ref.Hash {
			return fmt.Sprintf("parameters differ across data-parallel ranks after the last step: rank 0 %s (sum %g), rank %d %s (sum %g)",
				ref.Hash, ref.Sum, r.Rank, r.Checksum.Hash, r.Checksum.Sum)
		}
	}
	return ""
}

// outcomeOf maps a worker's error status to an outcome.
func outcomeOf(status string) store.Outcome {
	switch store.Outcome(status) {
	case store.OOM, store.Unsupported, store.Failed:
		return store.Outcome(status)
	}
	return store.Failed
}

// workerStatus maps an engine error to the status a worker reports.
func workerStatus(err error) string {
	switch {
	case errors.Is(err, engine.ErrOOM):
		return string(store.OOM)
	case errors.Is(err, engine.ErrUnsupported):
		return string(store.Unsupported)
	}
	return string(store.Failed)
}

func lastSteps(ranks []*rankState) string {
	parts := make([]string, len(ranks))
	for k, st := range ranks {
		parts[k] = fmt.Sprintf("rank%d=%d", k, st.lastStep)
	}
	return strings.Join(parts, " ")
}

func uniqueNonEmpty(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
