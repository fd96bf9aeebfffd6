// Package timeline says where a launch's wall-clock time goes: the phases of
// every launch and rank built from the marks the workers and the runner take
// (Build), the totals of a study (Summarize), when step times settle
// (SettleStep), and, from earlier runs, how long a study will take (Estimate)
// or still takes (ETA). It computes; the runner records, the report and the
// commands render.
package timeline

import (
	"time"

	"github.com/casestudy/casestudy/store"
)

// Marks a worker takes, each at the end of the phase named in phaseOf, in
// this order (docs/results-format.md).
const (
	MarkStarted   = "started"    // the worker process runs (spawn)
	MarkJoined    = "joined"     // rendezvous joined, configuration received
	MarkLoaded    = "loaded"     // engine library loaded (dlopen, ABI check)
	MarkReleased  = "released"   // the runner let it touch the GPU (the previous launch ended)
	MarkNCCLID    = "nccl_id"    // NCCL unique id exchanged (NCCL worlds only)
	MarkCreated   = "created"    // engine created (device, model, optimizer, data, communicator)
	MarkReady     = "ready"      // every rank passed the start barrier
	MarkFirstStep = "first_step" // step 0 done (autotuning, allocator growth, graph capture)
	MarkWarm      = "warm"       // warm-up done: the measured window opens
	MarkMeasured  = "measured"   // measured steps done: the window closes
	MarkProfiled  = "profiled"   // checksum read, profiled steps done (knob profile only)
	MarkFinished  = "finished"   // checksum read, engine destroyed (teardown)
)

// Phase names. A phase ends at its mark; the runner's own phases surround the
// workers'.
const (
	PhasePreheat      = "preheat"       // the unmeasured pre-heat launch of a GPU run, whole (the run's, not a trial's)
	PhaseCommit       = "commit"        // committing the previous trial's record (fsync)
	PhaseSchedule     = "schedule"      // the runner between launches: statistics, progress, choosing the next launch
	PhasePrepare      = "prepare"       // rendezvous listener, log files, environment, MPS daemon
	PhaseSpawn        = "spawn"         // process start until the worker runs
	PhaseRendezvous   = "rendezvous"    // join, welcome
	PhaseEngineLoad   = "engine_load"   // dlopen of the engine library and its libtorch
	PhaseWaitPrevious = "wait_previous" // prepared ahead: waiting for the previous launch to end
	PhaseNCCLID       = "nccl_id"       // NCCL unique id exchange
	PhaseEngineCreate = "engine_create" // cs_create, when the engine does not break it down
	PhaseStartBarrier = "start_barrier" // info sent, waiting for every rank
	PhaseFirstStep    = "first_step"    // step 0
	PhaseWarmup       = "warmup"        // warm-up steps after the first
	PhaseMeasured     = "measured"      // the measured steps
	PhaseProfile      = "profile"       // checksum, then the profiled steps after the measured ones (knob profile)
	PhaseTeardown     = "teardown"      // checksum, engine destroyed
	PhaseExit         = "exit"          // done sent until the runner reaped the process
	PhaseUnfinished   = "unfinished"    // a rank that ended before finishing: its last mark until it exited
	PhaseCollect      = "collect"       // the runner: logs parsed, GPU samples, outcome, record built
	// CreatePrefix prefixes the engine's own creation phases (engine.Info
	// init_phases: create.device_init, create.model_build, ...).
	CreatePrefix = "create."
)

// workerMarks are the worker's marks in order with the phase each ends.
var workerMarks = []struct{ mark, phase string }{
	{MarkStarted, PhaseSpawn}, {MarkJoined, PhaseRendezvous}, {MarkLoaded, PhaseEngineLoad},
	{MarkReleased, PhaseWaitPrevious}, {MarkNCCLID, PhaseNCCLID}, {MarkCreated, PhaseEngineCreate},
	{MarkReady, PhaseStartBarrier}, {MarkFirstStep, PhaseFirstStep}, {MarkWarm, PhaseWarmup},
	{MarkMeasured, PhaseMeasured}, {MarkProfiled, PhaseProfile}, {MarkFinished, PhaseTeardown},
}

// Order is every phase in the order a launch goes through them (the engine's
// creation phases, create.*, sit where engine_create is).
var Order = []string{PhasePreheat, PhaseCommit, PhaseSchedule, PhasePrepare, PhaseSpawn, PhaseRendezvous, PhaseEngineLoad,
	PhaseWaitPrevious, PhaseNCCLID, PhaseEngineCreate, PhaseStartBarrier, PhaseFirstStep, PhaseWarmup,
	PhaseMeasured, PhaseProfile, PhaseTeardown, PhaseExit, PhaseUnfinished, PhaseCollect}

// Rank is what the runner knows of one rank's time: when its processes were
// being started (Spawn, the same for every rank), the marks its worker sent,
// when it exited, and the engine's own creation phases (nil when it reports
// none).
type Rank struct {
	Spawn  time.Time
	Marks  map[string]time.Time
	Exit   time.Time
	Create []store.Phase
}

// RankTimeline is a rank's phases from Spawn to Exit: one per mark it sent,
// then exit (or unfinished, when it did not reach teardown's end).
func RankTimeline(r Rank) *store.Timeline {
	t := &store.Timeline{Start: r.Spawn.UTC(), End: r.Exit.UTC()}
	at := r.Spawn
	for _, m := range workerMarks {
		end, ok := r.Marks[m.mark]
		if !ok {
			continue
		}
		end = clamp(end, at, r.Exit)
		if m.phase == PhaseEngineCreate && len(r.Create) > 0 {
			t.Phases = append(t.Phases, splitCreate(ms(end.Sub(at)), r.Create)...)
		} else {
			t.Phases = append(t.Phases, store.Phase{Name: m.phase, MS: ms(end.Sub(at))})
		}
		at = end
	}
	last := PhaseExit
	if _, ok := r.Marks[MarkFinished]; !ok {
		last = PhaseUnfinished
	}
	t.Phases = append(t.Phases, store.Phase{Name: last, MS: ms(r.Exit.Sub(at))})
	return t
}

// Launch is what the runner knows of one launch's time: where its timeline
// starts (the previous launch's end, or when its preparation began when it
// was prepared ahead), the record commits since then, when it started the
// ranks' processes, the ranks, and when it finished collecting.
type Launch struct {
	Start    time.Time
	CommitMS float64 // commits inside [Start, Prepare]
	Prepare  time.Time
	Spawn    time.Time
	Ranks    []Rank
	End      time.Time
}

// LaunchTimeline is a launch's phases from Start to End: commit and schedule
// (the runner before it), prepare, then each worker phase ending when the
// last rank ended it, exit (the last rank reaped) and collect. The phases
// add up to End − Start.
func LaunchTimeline(l Launch) *store.Timeline {
	t := &store.Timeline{Start: l.Start.UTC(), End: l.End.UTC()}
	at := l.Start
	add := func(name string, end time.Time) {
		end = clamp(end, at, l.End)
		t.Phases = append(t.Phases, store.Phase{Name: name, MS: ms(end.Sub(at))})
		at = end
	}
	if gap := l.Prepare.Sub(l.Start); gap > 0 {
		commit := min(time.Duration(l.CommitMS*float64(time.Millisecond)), gap)
		if commit > 0 {
			add(PhaseCommit, l.Start.Add(commit))
		}
		add(PhaseSchedule, l.Prepare)
	}
	add(PhasePrepare, l.Spawn)
	for _, m := range workerMarks {
		var end time.Time
		var create []store.Phase
		for _, r := range l.Ranks {
			if e, ok := r.Marks[m.mark]; ok && e.After(end) {
				end, create = e, r.Create
			}
		}
		if end.IsZero() {
			continue
		}
		if m.phase == PhaseEngineCreate && len(create) > 0 {
			start := at
			end = clamp(end, at, l.End)
			t.Phases = append(t.Phases, splitCreate(ms(end.Sub(start)), create)...)
			at = end
			continue
		}
		add(m.phase, end)
	}
	var exit time.Time
	for _, r := range l.Ranks {
		if r.Exit.After(exit) {
			exit = r.Exit
		}
	}
	if !exit.IsZero() {
		add(PhaseExit, exit)
	}
	add(PhaseCollect, l.End)
	return t
}

// splitCreate breaks the wall time of cs_create into the engine's own
// phases, scaled down when they add up to more than the wall time the worker
// saw (they never should), with what they do not cover as create.other.
func splitCreate(wallMS float64, engine []store.Phase) []store.Phase {
	sum := 0.0
	for _, p := range engine {
		sum += max(p.MS, 0)
	}
	scale := 1.0
	if sum > wallMS && sum > 0 {
		scale = wallMS / sum
	}
	out := make([]store.Phase, 0, len(engine)+1)
	for _, p := range engine {
		out = append(out, store.Phase{Name: CreatePrefix + p.Name, MS: max(p.MS, 0) * scale})
	}
	return append(out, store.Phase{Name: CreatePrefix + "other", MS: max(0, wallMS-sum*scale)})
}

func clamp(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if !hi.IsZero() && t.After(hi) {
		return hi
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// IsCreate says whether a phase is part of the engine's creation.
func IsCreate(name string) bool {
	return name == PhaseEngineCreate || len(name) > len(CreatePrefix) && name[:len(CreatePrefix)] == CreatePrefix
}

// Groups of phases for charts and compact tables, in launch order.
const (
	GroupRunner    = "runner"        // commit, schedule, prepare, collect
	GroupProcess   = "processes"     // spawn, rendezvous, wait_previous, nccl_id, start_barrier
	GroupLoad      = "engine load"   // engine_load
	GroupCreate    = "engine create" // engine_create, create.*
	GroupFirstStep = "first step"
	GroupWarmup    = "warm-up"
	GroupMeasured  = "measured"
	GroupProfile   = "profile"  // the profiled steps after the measured ones (knob profile)
	GroupTeardown  = "teardown" // teardown, exit, unfinished
)

// Groups lists the groups in launch order.
var Groups = []string{GroupRunner, GroupProcess, GroupLoad, GroupCreate, GroupFirstStep, GroupWarmup, GroupMeasured, GroupProfile, GroupTeardown}

// GroupOf is the group a phase falls in.
func GroupOf(phase string) string {
	switch {
	case IsCreate(phase):
		return GroupCreate
	case phase == PhaseEngineLoad:
		return GroupLoad
	case phase == PhaseFirstStep:
		return GroupFirstStep
	case phase == PhaseWarmup:
		return GroupWarmup
	case phase == PhaseMeasured:
		return GroupMeasured
	case phase == PhaseProfile:
		return GroupProfile
	case phase == PhaseTeardown || phase == PhaseExit || phase == PhaseUnfinished:
		return GroupTeardown
	case phase == PhaseCommit || phase == PhaseSchedule || phase == PhasePrepare || phase == PhaseCollect:
		return GroupRunner
	}
	return GroupProcess
}

// ByGroup adds phases up by group, in Groups order (groups without time are left out).
func ByGroup(phases []store.Phase) []store.Phase {
	ms := map[string]float64{}
	for _, p := range phases {
		ms[GroupOf(p.Name)] += p.MS
	}
	var out []store.Phase
	for _, g := range Groups {
		if v, ok := ms[g]; ok {
			out = append(out, store.Phase{Name: g, MS: v})
		}
	}
	return out
}
