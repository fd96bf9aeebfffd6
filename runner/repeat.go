package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
)

// repeatResult is one launch of a trial, classified.
type repeatResult struct {
	Rec        store.RepeatRecord
	FailedRank int // first failing rank, -1 none
	ExitCode   int
	Signal     string
	Throttled  bool  // tainted by thermal or hardware slowdown in the measured window
	halt       error // an environment fault ended it: the sweep stops (stopEnvironment)
	ranks      []*rankState
}

// infraError is a failure of the machinery (rendezvous, launch), not of the
// trial: it may be retried.
type infraError struct{ err error }

func (e *infraError) Error() string { return "infrastructure: " + e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// runRepeat runs one repeat of a trial: the launch prepared for it while
// the previous one ran, or a fresh one. When the batch named an upcoming
// launch (overlap), that one is prepared as soon as this one has started, or
// with overlap tail once this one's steps are done. It
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
	if next != nil && r.fixedRendezvousPort() {
		// Two launches cannot listen on one fixed port at once: none is
		// prepared ahead (each launch's record says so: prepared_ahead false).
		if !r.saidFixedPort {
			r.logf("the rendezvous listens on the fixed port of %s: no launch is prepared ahead of the one before it ends "+
				"(--overlap needs a second listener; give --rdzv-addr without a port for it)", r.opts.RendezvousAddr)
			r.saidFixedPort = true
		}
		next = nil
	}
	if next != nil {
		prepare := func() {
			nl, err := r.startLaunch(ctx, next.spec, next.rep, false)
			if err != nil {
				r.logf("trial %s repeat %d: preparing it ahead: %v (it starts after this launch)", next.spec.Trial.ID, next.rep, err)
			} else {
				r.prepared = nl
			}
		}
		if r.prepareAtStepsDone() {
			l.stepsDone = prepare // by the watcher, when every rank's steps are done
		} else {
			prepare()
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

// mpsLogName is where a launch's MPS control log is kept.
func mpsLogName(trialID string, rep int) string {
	return filepath.Join(filepath.Dir(store.LogName(trialID, 0, rep)), "mps-control."+store.RepeatTag(rep)+".log")
}

// checksumsDisagree compares the parameter checksums of ranks that must hold
// identical parameters: every rank of a data-parallel world, and with pipeline
// stages the replicas of each stage (ranks s, S+s, ...: the engine's checksum
// of a pipelined rank covers the parameters its stage owns). After the same
// all-reduced updates they must be identical; a difference means wrong
// reductions (e.g. a forced NCCL protocol that sums wrongly, a broken stage
// all-reduce). With tensor parallelism each rank holds its tensor rank's
// shard (ranks tensor-fastest: tensor rank = rank mod tp.degree), so the
// replicas compared are the data-parallel ranks of equal tensor rank.
func checksumsDisagree(sp *trialSpec, ranks []store.RankRecord) string {
	c := sp.Configs[0]
	if c.Dist.WorldSize < 2 || len(ranks) < 2 {
		return ""
	}
	tp := tpDegree(c)
	groups := map[shard][]store.RankRecord{} // a shard -> its replicas, in rank order
	var order []shard
	for _, r := range ranks {
		stage := 0
		if c.Pipeline.Stages > 1 {
			if r.Info == nil || r.Info.Pipeline == nil {
				return "" // a rank that never reported its stage: nothing to compare
			}
			stage = r.Info.Pipeline.Stage
		}
		k := shard{stage, r.Rank % tp}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		g, stage := groups[k], k.stage
		ref := g[0].Checksum
		for _, r := range g[1:] {
			if ref == nil || r.Checksum == nil {
				return ""
			}
			if r.Checksum.Hash == ref.Hash {
				continue
			}
			what := "data-parallel ranks"
			if c.Pipeline.Stages > 1 {
				what = fmt.Sprintf("the data-parallel replicas of pipeline stage %d", stage)
			}
			if tp > 1 {
				what = fmt.Sprintf("the data-parallel replicas of tensor rank %d (tp.degree %d)", k.tensor, tp)
			}
			return fmt.Sprintf("parameters differ across %s after the last step: rank %d %s (sum %g), rank %d %s (sum %g)",
				what, g[0].Rank, ref.Hash, ref.Sum, r.Rank, r.Checksum.Hash, r.Checksum.Sum)
		}
	}
	if tp > 1 {
		return tensorGroupDisagree(groups, order)
	}
	return ""
}

// shard is what a rank holds: its pipeline stage's parameters, split by its
// tensor rank.
type shard struct{ stage, tensor int }

// tensorGroupDisagree: the engine's checksum of a tensor-parallel rank is of
// its stage's parameters (the whole model without a pipeline) gathered over its
// tensor group, in the one-rank layout
// (docs/tensor-parallel.md), so the tensor ranks of one stage report the same
// hash too; a difference means a broken gather or shards updated apart.
func tensorGroupDisagree(groups map[shard][]store.RankRecord, order []shard) string {
	first := map[int]store.RankRecord{} // stage -> the first shard's first replica
	for _, k := range order {
		r := groups[k][0]
		f, ok := first[k.stage]
		if !ok {
			first[k.stage] = r
			continue
		}
		if f.Checksum == nil || r.Checksum == nil {
			return ""
		}
		if f.Checksum.Hash != r.Checksum.Hash {
			return fmt.Sprintf("the gathered parameters differ across the tensor-parallel group after the last step (the checksum "+
				"of every tensor rank is of its stage's parameters, gathered): rank %d %s (sum %g), rank %d %s (sum %g)",
				f.Rank, f.Checksum.Hash, f.Checksum.Sum, r.Rank, r.Checksum.Hash, r.Checksum.Sum)
		}
	}
	return ""
}

// workerStatus maps an engine error to the status a worker reports.
func workerStatus(err error) string {
	switch {
	case errors.Is(err, engine.ErrOOM):
		return string(store.OOM)
	case errors.Is(err, engine.ErrUnsupported):
		return string(store.Unsupported)
	case errors.Is(err, engine.ErrComm):
		return rendezvous.StatusComm
	}
	return string(store.Failed)
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

// fixedRendezvousPort says whether the rendezvous listens on a fixed port
// (--rdzv-addr HOST:PORT with PORT > 0), where a launch prepared ahead could
// not listen beside the running one.
func (r *Runner) fixedRendezvousPort() bool {
	_, port, err := net.SplitHostPort(r.opts.RendezvousAddr)
	return err == nil && port != "" && port != "0"
}
