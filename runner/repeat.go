package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
)

// repeatResult is one launch of a trial, classified.
type repeatResult struct {
	Rec        store.RepeatRecord
	FailedRank int // first failing rank, -1 none
	ExitCode   int
	Signal     string
	Throttled  bool
}

// infraError is a failure of the machinery (rendezvous, launch), not of the
// trial: it may be retried.
type infraError struct{ err error }

func (e *infraError) Error() string { return "infrastructure: " + e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// runRepeat launches one repeat of a trial and watches it until every rank has
// ended: the runner owns the deadlines (trial timeout, heartbeat silence) and
// kills the whole group on the first failure.
func (r *Runner) runRepeat(ctx context.Context, sp *trialSpec, rep int) (*repeatResult, error) {
	o := &r.opts
	n := sp.Ranks
	welcomes := make([]rendezvous.Welcome, n)
	for i := range welcomes {
		welcomes[i] = rendezvous.Welcome{Config: sp.Configs[i], WarmupSteps: o.Study.Workload.WarmupSteps,
			Steps: o.Study.Workload.Steps, HeartbeatMS: int(o.HeartbeatEvery / time.Millisecond),
			EngineLib: o.Machine.EngineLib, Ranks: n}
		if steps := sp.Launch.ProfileSteps; steps > 0 {
			trace, err := filepath.Abs(filepath.Join(o.Writer.Dir, store.TraceName(sp.Trial.ID, i, rep)))
			if err != nil {
				return nil, &infraError{err}
			}
			welcomes[i].Profile = &rendezvous.ProfilePlan{Steps: steps, TracePath: trace}
		}
	}
	for k := range welcomes {
		if sp.Devices[k] != "" { // each rank sees only its GPU
			welcomes[k].Config.DeviceIndex = 0
		}
	}
	token := rendezvous.NewToken()
	srv, err := rendezvous.Listen(o.RendezvousAddr, token, welcomes, r.logf)
	if err != nil {
		return nil, &infraError{err}
	}
	defer srv.Close()

	addr := srv.Addr()
	if o.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(o.AdvertiseHost, port)
	}
	srv.ServeStore(addr) // Gloo meshes through the rendezvous: no rank serves a store
	extra := map[string]string{}
	if sp.Launch.MPS {
		d, err := startMPS(ctx, o.Machine.MPSControl, o.Env)
		if err != nil {
			return nil, &infraError{err}
		}
		defer func() {
			log, err := d.Stop(o.Env)
			if err != nil {
				r.logf("trial %s: %v", sp.Trial.ID, err)
			}
			if len(log) > 0 {
				_ = o.Writer.WriteFile(mpsLogName(sp.Trial.ID, rep), log)
			}
		}()
		maps.Copy(extra, d.Env(sp.Launch.ActiveThreadPct))
	}

	spec := launch.Spec{Trial: sp.Trial.ID, Path: o.Executable, Args: o.WorkerArgs,
		Nodes: max(o.Study.Workload.Nodes, 1), ProcsPerGPU: sp.Launch.ProcsPerGPU, Timeout: o.Timeout}
	var logs []io.Closer
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	for k := 0; k < n; k++ {
		f, err := o.Writer.CreateLog(sp.Trial.ID, k, rep)
		if err != nil {
			return nil, &infraError{err}
		}
		logs = append(logs, f)
		fmt.Fprintf(f, "# casestudy trial %s repeat %d rank %d of %d\n", sp.Trial.ID, rep, k, n)
		set := maps.Clone(sp.Set)
		maps.Copy(set, extra)
		set[rendezvous.EnvAddr], set[rendezvous.EnvToken], set[rendezvous.EnvRank] = addr, token, strconv.Itoa(k)
		if sp.Devices[k] != "" {
			set["CUDA_VISIBLE_DEVICES"] = sp.Devices[k]
		}
		spec.Ranks = append(spec.Ranks, launch.Rank{Rank: k, Env: launch.BuildEnv(o.Env, set, sp.Unset), Log: f, GPU: sp.Devices[k]})
	}
	group, err := o.Launcher.Start(ctx, spec)
	if err != nil {
		return nil, &infraError{err}
	}
	sampler := provenance.StartSampler(uniqueNonEmpty(sp.Devices), o.SampleEvery)
	res := r.watch(ctx, sp, rep, srv, group)
	res.Rec.Repeat = rep
	res.Rec.GPUSamples, res.Throttled = sampler.Stop()
	return res, nil
}

// mpsLogName is where a launch's MPS control log is kept.
func mpsLogName(trialID string, rep int) string {
	return filepath.Join(filepath.Dir(store.LogName(trialID, 0, rep)), "mps-control."+store.RepeatTag(rep)+".log")
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
