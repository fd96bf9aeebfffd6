package runner

import (
	"path/filepath"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// collect completes a launch's record once every rank has ended: the GPU
// samples and what throttled the GPUs inside the measured window (a launch
// slowed thermally or by hardware for more than 1% of it is tainted), NCCL's
// choices from the ranks' logs, when the step times settled, how the launch
// overlapped the next one (prepared while it ran, or nil), and last the
// timeline, so that it covers collect itself.
func (r *Runner) collect(l *launchRun, res *repeatResult, next *launchRun) {
	res.Rec.Repeat = l.rep
	from, to := measuredWindow(res.ranks)
	res.Rec.GPUSamples = l.sampler.Stop()
	if th := l.sampler.Throttle(from, to); th != nil {
		res.Rec.Throttle = th
		if why := provenance.Tainted(th); why != "" && res.Rec.Outcome == store.OK {
			res.Rec.Tainted, res.Throttled = why, true
		}
	}
	if l.sp.NCCLEvidence {
		for k := range res.Rec.Ranks {
			res.Rec.Ranks[k].NCCL = provenance.ReadNCCLTuning(filepath.Join(r.opts.Writer.Dir, store.LogName(l.sp.Trial.ID, k, l.rep)))
		}
	}
	if l.sp.NCCLTransport {
		r.transportEvidence(l, res)
	}
	res.Rec.SettleStep = settleStep(res.Rec.Ranks)
	if res.Rec.Outcome == store.OK { // the launch's value: samples over the window's wall clock
		if sps, tps, ok := measure.WindowThroughput(res.Rec.Ranks, to.Sub(from)); ok {
			res.Rec.SamplesPerS, res.Rec.TokensPerS, res.Rec.Basis = sps, tps, measure.WindowBasis
		}
	}
	now := time.Now()
	if r.opts.Overlap != OverlapOff && r.opts.Overlap != "" {
		ov := &store.Overlap{Mode: r.opts.Overlap, PreparedAhead: l.ahead}
		if next != nil && next != l {
			ov.NextPrepared = true
			ov.InWindowMS = overlapMS(next.tl.Prepare, next.preparedUntil(now), from, to)
		}
		res.Rec.Overlap = ov
	}

	for k, st := range res.ranks {
		if st.exit.IsZero() {
			st.exit = now
		}
		tr := timeline.Rank{Spawn: l.tl.Spawn, Marks: st.marks, Exit: st.exit, Create: createPhases(st.rec.Info)}
		l.tl.Ranks = append(l.tl.Ranks, tr)
		res.Rec.Ranks[k].Timeline = timeline.RankTimeline(tr)
	}
	l.tl.End = time.Now()
	res.Rec.Timeline = timeline.LaunchTimeline(l.tl)
	r.lastEnd, r.commitMS = l.tl.End, 0
}

// measuredWindow is the first rank's start of its measured steps to the last
// rank's end of them (zero when a rank did not finish them), on the runner's
// clock: each rank's marks are its own host's times, moved by its clock
// offset (rankState.clockOff), so that ranks on nodes whose clocks differ
// give the window their steps took, not the clocks' difference. Within a
// rank the two marks keep their own clock's distance.
func measuredWindow(ranks []*rankState) (from, to time.Time) {
	for _, st := range ranks {
		w, ok1 := st.marks[timeline.MarkWarm]
		m, ok2 := st.marks[timeline.MarkMeasured]
		if !ok1 || !ok2 {
			return time.Time{}, time.Time{}
		}
		w, m = w.Add(st.clockOff), m.Add(st.clockOff)
		if from.IsZero() || w.Before(from) {
			from = w
		}
		if m.After(to) {
			to = m
		}
	}
	return from, to
}

// settleStep is the launch's settle step: the latest of its ranks' (nil when
// no rank measured enough steps to say).
func settleStep(ranks []store.RankRecord) *int {
	at := -1
	for _, rk := range ranks {
		ms := make([]float64, len(rk.Steps))
		for i, s := range rk.Steps {
			ms[i] = s.StepMS
		}
		at = max(at, timeline.SettleStep(rk.WarmupStepMS, ms))
	}
	if at < 0 {
		return nil
	}
	return &at
}

// overlapMS is how long [a0, a1] and [b0, b1] overlap, in milliseconds.
func overlapMS(a0, a1, b0, b1 time.Time) float64 {
	if b0.IsZero() || b1.IsZero() {
		return 0
	}
	lo, hi := a0, a1
	if b0.After(lo) {
		lo = b0
	}
	if b1.Before(hi) {
		hi = b1
	}
	if !hi.After(lo) {
		return 0
	}
	return float64(hi.Sub(lo)) / float64(time.Millisecond)
}

// createPhases are the engine's own phases of cs_create, from its info
// (engine.Info.InitPhases: device_init, model_build, optimizer, data_setup,
// comm_init); nil when it reports none, and engine_create stays one phase.
func createPhases(info *engine.Info) []store.Phase {
	if info == nil || len(info.InitPhases) == 0 {
		return nil
	}
	out := make([]store.Phase, len(info.InitPhases))
	for i, p := range info.InitPhases {
		out[i] = store.Phase{Name: p.Name, MS: p.MS}
	}
	return out
}
