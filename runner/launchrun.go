package runner

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

// Overlap modes (casestudy run --overlap): whether the next launch's
// processes start, join the rendezvous and load the engine library while the
// current launch runs. They touch no GPU until the current launch has ended.
const (
	OverlapOff = "off"
	// OverlapTail prepares the next launch once the current one's steps are
	// done (its measured window closed, its profiled steps too): the
	// preparation hides behind the teardown and exit, and nothing of the next
	// launch exists while a launch measures. The default.
	OverlapTail = "tail"
	// OverlapOn prepares the next launch as soon as the current one starts,
	// inside its start-up (in_window_ms records any part that reached the
	// measured window).
	OverlapOn = "on"
	// OverlapAA is the A/A test of overlap on: launches host the next launch's
	// preparation in the pattern 1,1,0,0,... so that being prepared ahead and
	// hosting a preparation each come in all four combinations, interleaved in
	// one run (casestudy timeline compares them). OverlapAATail is the same
	// test of tail.
	OverlapAA     = "aa"
	OverlapAATail = "aa-tail"
)

// OverlapModes are the values of casestudy run --overlap.
var OverlapModes = []string{OverlapOff, OverlapTail, OverlapOn, OverlapAA, OverlapAATail}

// launchRun is one launch in flight: its rendezvous, log files, processes
// and, once released, its GPU sampler.
type launchRun struct {
	sp      *trialSpec
	rep     int
	srv     *rendezvous.Server
	group   launch.Group
	logs    []io.Closer
	stopMPS func()
	sampler *provenance.Sampler
	tl      timeline.Launch // Start, CommitMS, Prepare, Spawn; the ranks and End at the end
	ahead   bool            // started while the previous launch ran
	// stepsDone, when set, runs once every rank's steps are done (overlap
	// tail: it prepares the next launch)
	stepsDone func()
}

// startLaunch prepares a launch (rendezvous, logs, environment, MPS daemon)
// and starts its processes. Released, its ranks create their engines at once;
// otherwise they wait after loading the engine library until release.
func (r *Runner) startLaunch(ctx context.Context, sp *trialSpec, rep int, released bool) (_ *launchRun, err error) {
	o := &r.opts
	l := &launchRun{sp: sp, rep: rep, ahead: !released}
	l.tl.Prepare = time.Now()
	if released { // the timeline covers the runner's time since the previous launch
		l.tl.Start, l.tl.CommitMS = r.lastEnd, r.commitMS
	} else {
		l.tl.Start = l.tl.Prepare
	}
	defer func() {
		if err != nil {
			l.close()
			err = &infraError{err}
		}
	}()
	welcomes, err := r.welcomes(sp, rep)
	if err != nil {
		return nil, err
	}
	token := rendezvous.NewToken()
	if l.srv, err = rendezvous.Listen(o.RendezvousAddr, token, welcomes, r.logf); err != nil {
		return nil, err
	}
	addr := l.srv.Addr()
	if o.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(o.AdvertiseHost, port)
	}
	l.srv.ServeStore(addr) // Gloo meshes through the rendezvous: no rank serves a store
	extra := map[string]string{}
	if sp.Launch.MPS {
		d, err := startMPS(ctx, o.Machine.MPSControl, o.Env)
		if err != nil {
			return nil, err
		}
		l.stopMPS = func() {
			log, err := d.Stop(o.Env)
			if err != nil {
				r.logf("trial %s: %v", sp.Trial.ID, err)
			}
			if len(log) > 0 {
				_ = o.Writer.WriteFile(mpsLogName(sp.Trial.ID, rep), log)
			}
		}
		maps.Copy(extra, d.Env(sp.Launch.ActiveThreadPct))
	}
	if _, set := launch.LookupEnv(o.Env, ncclDebugSubsysVar); sp.ncclDebugSubsys() != "" && !set {
		extra[ncclDebugSubsysVar] = sp.ncclDebugSubsys() // a value the parent set stands
	}
	spec := launch.Spec{Trial: sp.Trial.ID, Path: o.Executable, Args: o.WorkerArgs,
		Nodes: max(o.Study.Workload.Nodes, 1), ProcsPerGPU: sp.Launch.ProcsPerGPU, Timeout: o.Timeout}
	if o.Machine.Rehearse {
		spec.Nodes = 1 // every rank on this machine
	}
	for k := 0; k < sp.Ranks; k++ {
		f, err := o.Writer.CreateLog(sp.Trial.ID, k, rep)
		if err != nil {
			return nil, err
		}
		l.logs = append(l.logs, f)
		fmt.Fprintf(f, "# casestudy trial %s repeat %d rank %d of %d\n", sp.Trial.ID, rep, k, sp.Ranks)
		set := maps.Clone(sp.Set)
		maps.Copy(set, extra)
		set[rendezvous.EnvAddr], set[rendezvous.EnvToken], set[rendezvous.EnvRank] = addr, token, strconv.Itoa(k)
		if sp.Devices[k] != "" {
			set["CUDA_VISIBLE_DEVICES"] = sp.Devices[k]
		}
		spec.Ranks = append(spec.Ranks, launch.Rank{Rank: k, Env: launch.BuildEnv(o.Env, set, sp.Unset), Log: f, GPU: sp.Devices[k]})
	}
	if released {
		l.release(r)
	}
	l.tl.Spawn = time.Now()
	group, err := o.Launcher.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	l.group = group
	return l, nil
}

// welcomes are the ranks' configurations for one launch, with the profile
// each rank writes (knob profile; not in the unmeasured pre-heat launch,
// which also stops after preheatSteps steps past its warm-up).
func (r *Runner) welcomes(sp *trialSpec, rep int) ([]rendezvous.Welcome, error) {
	o := &r.opts
	ws := make([]rendezvous.Welcome, sp.Ranks)
	steps := o.Study.Workload.Steps
	if rep == store.PreheatRepeat {
		steps = min(steps, preheatSteps)
	}
	for i := range ws {
		ws[i] = rendezvous.Welcome{Config: sp.Configs[i], WarmupSteps: o.Study.Workload.WarmupSteps,
			Steps: steps, HeartbeatMS: int(o.HeartbeatEvery / time.Millisecond),
			EngineLib: o.Machine.EngineLib, Ranks: sp.Ranks}
		if rep != store.PreheatRepeat { // the pre-heat stops early anyway
			ws[i].WarmupSeconds, ws[i].MeasureSeconds = o.Study.Workload.Windows(o.Machine.Device)
		}
		if sp.Devices[i] != "" { // each rank sees only its GPU
			ws[i].Config.DeviceIndex = 0
			if _, slurm := o.Launcher.(*launch.Slurm); slurm { // each rank sees its node's GPUs
				ws[i].DevicePerLocalRank = sp.Launch.ProcsPerGPU
			}
		}
		if steps := sp.Launch.ProfileSteps; steps > 0 && rep != store.PreheatRepeat { // the pre-heat's would be thrown away
			trace, err := filepath.Abs(filepath.Join(o.Writer.Dir, store.TraceName(sp.Trial.ID, i, rep)))
			if err != nil {
				return nil, err
			}
			ws[i].Profile = &rendezvous.ProfilePlan{Steps: steps, TracePath: trace}
		}
	}
	return ws, nil
}

// release lets the launch's ranks create their engines, and starts sampling
// its GPUs.
func (l *launchRun) release(r *Runner) {
	l.sampler = provenance.StartSampler(r.gpus(l.sp.Devices), r.opts.SampleEvery)
	l.srv.Set(rendezvous.KeyGo, "1")
}

// close ends what the launch holds: the processes (killed when still
// running), the MPS daemon, the rendezvous and the log files.
func (l *launchRun) close() {
	if l.group != nil {
		l.group.Kill(0)
		for range l.group.Exits() {
		}
	}
	if l.sampler != nil {
		l.sampler.Stop()
	}
	if l.stopMPS != nil {
		l.stopMPS()
	}
	if l.srv != nil {
		l.srv.Close()
	}
	for _, f := range l.logs {
		f.Close()
	}
}

// preparedUntil is when the launch's preparation ended (every rank loaded the
// engine library and waits for the GPU), or now when it is still going.
func (l *launchRun) preparedUntil(now time.Time) time.Time {
	n, since := l.srv.Waiting(rendezvous.KeyGo)
	if n == l.sp.Ranks && !since.IsZero() {
		return since
	}
	return now
}

// gpus are the sampler's readers of a launch's GPUs (none on CPU).
func (r *Runner) gpus(devices []string) []provenance.Device {
	names := uniqueNonEmpty(devices)
	if len(names) == 0 || r.opts.Machine.NVML == nil {
		return nil
	}
	return r.opts.Machine.NVML.Devices(names)
}

// planNext names the launch (next, rep) to prepare while the launch about
// to start (cur, the run's launch number r.launches+1) runs, when the
// overlap mode says so for this launch and both may overlap; otherwise
// nothing is prepared. A prediction that turns out wrong (the trial stopped,
// a tainted launch is relaunched) costs only the discarded preparation.
func (r *Runner) planNext(cur, next *trialSpec, rep int) {
	r.upcoming = nil
	if cur != nil && next != nil && r.hostsNext(r.launches+1) && r.canOverlap(cur) && r.canOverlap(next) {
		r.upcoming = &nextLaunch{spec: next, rep: rep}
	}
}

// canOverlap says whether a launch may be prepared while another runs: local
// launches without MPS only (an MPS daemon belongs to one launch; a Slurm
// step may not start before the previous one ends).
func (r *Runner) canOverlap(sp *trialSpec) bool {
	if _, local := r.opts.Launcher.(launch.Local); !local {
		return false
	}
	return !sp.Launch.MPS && sp.Unsupported == ""
}

// hostsNext says whether the launch numbered n (1-based) prepares the next
// one while it runs.
func (r *Runner) hostsNext(n int) bool {
	switch r.opts.Overlap {
	case OverlapOn, OverlapTail:
		return true
	case OverlapAA, OverlapAATail:
		return (n-1)%4 < 2 // 1,1,0,0: prepared-ahead and hosting in every combination
	}
	return false
}

// prepareAtStepsDone says whether the next launch is prepared once the
// current one's steps are done rather than as soon as it starts.
func (r *Runner) prepareAtStepsDone() bool {
	return r.opts.Overlap == OverlapTail || r.opts.Overlap == OverlapAATail
}
