package runner

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

const timelineStudy = `name: runner-timeline
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 3, steps: 4, repeats: 2, timeout: 30s, interleave: true}
sweep:
  strategy: grid
  knobs: {micro_batch: [1, 2]}
`

// CheckTimelines asserts what every launch's timeline must satisfy: present,
// phases of non-negative length adding up to the launch's wall time, the
// ranks' timelines inside the launch's, the measured phase at least the
// steps' own time, and warm-up step times and a settle step recorded.
func checkTimelines(t *testing.T, run *store.Run, warmup int) {
	t.Helper()
	for _, tr := range run.Trials {
		if tr.Outcome != store.OK {
			continue
		}
		for _, rp := range tr.Repeats {
			tl := rp.Timeline
			require.NotNil(t, tl, "%s r%d", tr.ID, rp.Repeat)
			sum := 0.0
			for _, p := range tl.Phases {
				assert.GreaterOrEqual(t, p.MS, 0.0, "%s r%d phase %s", tr.ID, rp.Repeat, p.Name)
				sum += p.MS
			}
			assert.InDelta(t, tl.WallMS(), sum, 0.01, "phases add up to the launch's wall time")
			assert.True(t, tl.End.After(tl.Start))
			names := map[string]bool{}
			for _, p := range tl.Phases {
				names[p.Name] = true
			}
			for _, want := range []string{timeline.PhasePrepare, timeline.PhaseSpawn, timeline.PhaseRendezvous,
				timeline.PhaseEngineLoad, timeline.PhaseStartBarrier, timeline.PhaseMeasured, timeline.PhaseTeardown,
				timeline.PhaseExit, timeline.PhaseCollect} {
				assert.True(t, names[want], "%s r%d has no %s phase: %+v", tr.ID, rp.Repeat, want, tl.Phases)
			}
			assert.True(t, names[timeline.PhaseEngineCreate] || names[timeline.CreatePrefix+"other"], "engine creation")
			if warmup > 0 {
				assert.True(t, names[timeline.PhaseFirstStep], "first step")
			}
			for _, rk := range rp.Ranks {
				rt := rk.Timeline
				require.NotNil(t, rt, "rank %d", rk.Rank)
				assert.False(t, rt.Start.Before(tl.Start), "a rank starts inside its launch")
				assert.False(t, rt.End.After(tl.End), "and ends inside it")
				rsum := 0.0
				for _, p := range rt.Phases {
					assert.GreaterOrEqual(t, p.MS, 0.0)
					rsum += p.MS
				}
				assert.InDelta(t, rt.WallMS(), rsum, 0.01)
				stepMS := 0.0
				for _, s := range rk.Steps {
					stepMS += s.StepMS
				}
				assert.GreaterOrEqual(t, rt.PhaseMS(timeline.PhaseMeasured)+0.5, stepMS,
					"the measured phase holds the measured steps' own time")
				assert.LessOrEqual(t, rt.PhaseMS(timeline.PhaseMeasured), tl.PhaseMS(timeline.PhaseMeasured)+tl.PhaseMS(timeline.PhaseWarmup)+
					tl.PhaseMS(timeline.PhaseFirstStep)+tl.PhaseMS(timeline.PhaseStartBarrier)+0.5)
				assert.Len(t, rk.WarmupStepMS, warmup)
			}
			require.NotNil(t, rp.SettleStep, "%s r%d", tr.ID, rp.Repeat)
		}
	}
}

// TestLaunchTimeline: every launch of a sweep has its timeline; one launch
// starts where the previous one ended, so the launches cover the run.
func TestLaunchTimeline(t *testing.T) {
	f := newFixture(t, timelineStudy)
	run, err := f.run(t, context.Background(), f.options())
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	checkTimelines(t, run, 3)
	var launches []*store.Timeline
	for _, tr := range run.Trials {
		for _, rp := range tr.Repeats {
			launches = append(launches, rp.Timeline)
		}
	}
	require.Len(t, launches, 4)
	byStart := map[time.Time]bool{}
	for _, l := range launches {
		byStart[l.Start] = true
	}
	chained := 0
	for _, l := range launches {
		if byStart[l.End] {
			chained++
		}
	}
	assert.Equal(t, 3, chained, "each launch but the last ends where the next starts")
	s := timeline.Summarize(run)
	require.NotNil(t, s)
	assert.Equal(t, 4, s.Launches)
	assert.InDelta(t, 0, s.HiddenMS, 0.01, "nothing overlapped")
	assert.Greater(t, s.MeasuredShare, 0.0)
	assert.Less(t, s.MeasuredShare, 1.0)
	require.NotNil(t, s.Settle)
	assert.Equal(t, 4, s.Settle.Launches)
}

// TestOverlapPreparesTheNextLaunch: with overlap on, a launch is started
// while its predecessor runs and waits for it, and the sweep gives the same
// outcomes. Interleaved rounds of several trials are drawn one at a time in a
// random order, so the next launch is prepared inside a round (2 rounds of 2:
// the second of each); one trial after the other (interleave: false) or a
// single trial, every launch but the first.
func TestOverlapPreparesTheNextLaunch(t *testing.T) {
	for _, tc := range []struct {
		name          string
		study         string
		ahead, hosted int
	}{
		{"interleaved", timelineStudy, 2, 2},
		{"one trial after the other", strings.Replace(timelineStudy, "interleave: true", "interleave: false", 1), 3, 3},
		{"one trial (the A/A study's shape)", `name: runner-timeline-one
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 3, steps: 4, repeats: 4, timeout: 30s}
`, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.study)
			o := f.options()
			o.Overlap = OverlapOn
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			checkTimelines(t, run, 3)
			ahead, hosted := 0, 0
			for _, tr := range run.Trials {
				assert.Equal(t, store.OK, tr.Outcome, tr.Error)
				for _, rp := range tr.Repeats {
					require.NotNil(t, rp.Overlap)
					if rp.Overlap.PreparedAhead {
						ahead++
						assert.Contains(t, phaseNames(rp.Timeline), timeline.PhaseWaitPrevious)
					}
					if rp.Overlap.NextPrepared {
						hosted++
					}
				}
			}
			assert.Equal(t, tc.ahead, ahead, "launches prepared ahead")
			assert.Equal(t, tc.hosted, hosted, "launches that prepared the next one")
			s := timeline.Summarize(run)
			assert.Positive(t, s.HiddenMS, "the prepared launches ran alongside their predecessors")
		})
	}
}

// TestOverlapTailPreparesAfterTheSteps: with overlap tail, the next launch
// is prepared only once the current one's steps are done: it starts after
// its predecessor's measured window closed (never inside it), and waits for
// its end; with a profile knob, after the profiled steps too.
func TestOverlapTailPreparesAfterTheSteps(t *testing.T) {
	for _, tc := range []struct{ name, study string }{
		{"measured steps", `name: runner-overlap-tail
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 2, steps: 4, repeats: 4, timeout: 30s}
`},
		{"profiled steps", `name: runner-overlap-tail-profile
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 2, repeats: 3, timeout: 30s}
baseline: {profile: 2}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.study)
			o := f.options()
			o.Overlap = OverlapTail
			run, err := f.run(t, context.Background(), o)
			require.NoError(t, err)
			require.Len(t, run.Trials, 1)
			tr := run.Trials[0]
			require.Equal(t, store.OK, tr.Outcome, tr.Error)
			rps := tr.Repeats
			for i, rp := range rps {
				require.NotNil(t, rp.Overlap)
				assert.Equal(t, i > 0, rp.Overlap.PreparedAhead, "launch %d prepared ahead", i)
				assert.Equal(t, i < len(rps)-1, rp.Overlap.NextPrepared, "launch %d hosted the next", i)
				assert.Zero(t, rp.Overlap.InWindowMS, "launch %d: no preparation inside its measured window", i)
				if i == 0 {
					continue
				}
				prev := rps[i-1].Timeline
				stepsEnd := prev.Start.Add(time.Duration((phaseEndMS(prev, timeline.PhaseMeasured) + phaseMS(prev.Phases, timeline.PhaseProfile)) * float64(time.Millisecond)))
				assert.False(t, rp.Timeline.Start.Before(stepsEnd.Add(-5*time.Millisecond)),
					"launch %d prepared at %s, before its predecessor's steps ended at %s", i, rp.Timeline.Start, stepsEnd)
				assert.True(t, rp.Timeline.Start.Before(prev.End), "launch %d prepared while its predecessor ended", i)
				assert.Contains(t, phaseNames(rp.Timeline), timeline.PhaseWaitPrevious)
			}
			s := timeline.Summarize(run)
			assert.Positive(t, s.HiddenMS, "the prepared launches ran alongside their predecessors' ends")
		})
	}
}

// phaseEndMS is when tl's phase name ends, in ms since tl.Start.
func phaseEndMS(tl *store.Timeline, name string) float64 {
	at := 0.0
	for _, p := range tl.Phases {
		at += p.MS
		if p.Name == name {
			return at
		}
	}
	return at
}

// TestOverlapDiscardsWhatWillNotRun: a trial that fails stops; the launch
// prepared for its next repeat is killed and the sweep goes on.
func TestOverlapDiscardsWhatWillNotRun(t *testing.T) {
	f := newFixture(t, `name: runner-overlap-faults
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 2, repeats: 2, timeout: 20s}
sweep:
  strategy: list
  trials:
    - {fault.kind: error, fault.rank: 0, fault.at_step: 1}
    - {fault.kind: none}
`)
	o := f.options()
	o.Overlap = OverlapOn
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	got := map[string]store.Outcome{}
	for _, tr := range run.Trials {
		got[tr.Knobs["fault.kind"]] = tr.Outcome
	}
	assert.Equal(t, map[string]store.Outcome{"error": store.Failed, "none": store.OK}, got)
	for _, tr := range run.Trials {
		if tr.Outcome == store.OK {
			assert.Len(t, tr.Repeats, 2)
		}
	}
}

func TestOverlapAAPattern(t *testing.T) {
	r := &Runner{opts: Options{Overlap: OverlapAA}}
	var hosts []bool
	for n := 1; n <= 8; n++ {
		hosts = append(hosts, r.hostsNext(n))
	}
	assert.Equal(t, []bool{true, true, false, false, true, true, false, false}, hosts)
	combos := map[[2]bool]int{}
	for i := range hosts {
		ahead := i > 0 && hosts[i-1]
		combos[[2]bool{ahead, hosts[i]}]++
	}
	assert.Len(t, combos, 4, "prepared ahead and hosting come in every combination")

	// a run follows the pattern, launch by launch (the A/A study's shape: one
	// trial, repeated)
	f := newFixture(t, `name: runner-overlap-aa
model: {family: gpt, preset: tiny, seq_len: 16}
workload: {device: cpu, ranks: 1, warmup_steps: 1, steps: 2, repeats: 8, timeout: 30s}
`)
	o := f.options()
	o.Overlap = OverlapAA
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	var hosted, ahead []bool
	for _, rp := range run.Trials[0].Repeats {
		require.NotNil(t, rp.Overlap)
		hosted, ahead = append(hosted, rp.Overlap.NextPrepared), append(ahead, rp.Overlap.PreparedAhead)
	}
	assert.Equal(t, []bool{true, true, false, false, true, true, false, false}, hosted)
	assert.Equal(t, []bool{false, true, true, false, false, true, true, false}, ahead)
}

func phaseNames(tl *store.Timeline) []string {
	var out []string
	for _, p := range tl.Phases {
		out = append(out, p.Name)
	}
	return out
}

// TestForcedNCCLKnobGetsItsEvidence: a trial forcing nccl.algo gets
// NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS with TUNING, and the runner records
// the choices rank 0's log shows (here a stand-in NCCL that ignores the knob).
// The study sweeps nccl.algo, so its auto trial gets the same debug settings
// (the same logging inside the measured window) and its choices are recorded
// too.
func TestForcedNCCLKnobGetsItsEvidence(t *testing.T) {
	f := newFixture(t, `name: runner-nccl
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cuda, gpus: 2, warmup_steps: 1, steps: 2, timeout: 20s}
sweep:
  strategy: list
  trials:
    - {nccl.algo: Tree}
    - {nccl.algo: auto}
`)
	o := f.options()
	o.Machine = &Machine{Device: "cuda", GPUs: []string{"0", "1"}, EngineLib: "fake"}
	o.Env = append(o.Env, "NCCL_DEBUG=WARN") // the parent's value gives way to the evidence
	run, err := f.run(t, context.Background(), o)
	require.NoError(t, err)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		log, err := os.ReadFile(f.w.Dir + "/" + store.LogName(tr.ID, 0, 0))
		require.NoError(t, err)
		r0 := tr.Repeats[0].Ranks[0]
		assert.Contains(t, string(log), "env NCCL_DEBUG=INFO", "trial %s: every trial of a study sweeping nccl.* logs alike", tr.Knobs["nccl.algo"])
		assert.Contains(t, string(log), "env NCCL_DEBUG_SUBSYS="+provenance.NCCLDebugSubsys)
		require.NotNil(t, r0.NCCL)
		assert.Equal(t, []store.NCCLChoice{{Op: "AllReduce", Algo: "RING", Proto: "SIMPLE", Count: 1, MinBytes: 1 << 20, MaxBytes: 1 << 20}}, r0.NCCL.Choices)
		assert.Nil(t, tr.Repeats[0].Ranks[1].NCCL, "NCCL prints tuning lines on rank 0 only")
		if tr.Knobs["nccl.algo"] == "Tree" {
			e := provenance.CheckForcedNCCL("nccl.algo", "Tree", []*store.NCCLTuning{r0.NCCL})
			assert.Equal(t, provenance.NCCLNotUsed, e.Status())
		}
	}
}

// TestTransportEvidence: every rank's NCCL channel transports are recorded;
// on an NVLink host a launch whose channels went over SHM is tainted with the
// reason (left out of the statistics), one over P2P is not, and a trial that
// turns P2P off itself measures SHM on purpose.
func TestTransportEvidence(t *testing.T) {
	for _, tc := range []struct {
		via, baseline, taint string
	}{
		{via: "P2P/CUMEM"},
		{via: "SHM/direct/direct", taint: "through host memory (SHM), not P2P"},
		{via: "SHM/direct/direct", baseline: "baseline: {nccl.p2p_disable: true}\n"},
	} {
		f := newFixture(t, `name: runner-transport
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cuda, gpus: 2, warmup_steps: 1, steps: 2, repeats: 1, timeout: 20s}
`+tc.baseline)
		o := f.options()
		o.Machine = &Machine{Device: "cuda", GPUs: []string{"0", "1"}, EngineLib: "fake", NVLink: true}
		o.Env = append(o.Env, "FAKE_NCCL_VIA="+tc.via)
		run, err := f.run(t, context.Background(), o)
		require.NoError(t, err)
		require.Len(t, run.Trials, 1)
		tr := run.Trials[0]
		require.NotEmpty(t, tr.Repeats)
		rep := tr.Repeats[0]
		kind, _ := provenance.TransportKind(tc.via)
		for k, rk := range rep.Ranks {
			require.NotNil(t, rk.NCCLTransport, "rank %d", k)
			assert.Equal(t, map[string]int{kind: 1}, rk.NCCLTransport.Connections, "rank %d", k)
		}
		if tc.taint == "" {
			assert.Empty(t, rep.Tainted, tc.via+" "+tc.baseline)
		} else {
			assert.Contains(t, rep.Tainted, tc.taint)
		}
	}
}

// fakeNVML is a GPU whose clock-event reasons are fixed: every sample and the
// counters say reasons all the time.
type fakeNVML struct{ reasons uint64 }

func (f fakeNVML) Info() (provenance.GPUInfo, error) { return provenance.GPUInfo{}, nil }
func (f fakeNVML) Devices(names []string) []provenance.Device {
	return []provenance.Device{&constDevice{reasons: f.reasons, start: time.Now()}}
}

type constDevice struct {
	reasons uint64
	start   time.Time
}

func (d *constDevice) Index() int         { return 0 }
func (d *constDevice) MaxSMClock() uint32 { return 1980 }
func (d *constDevice) Sample() store.GPUSample {
	return store.GPUSample{SMClock: 1700, Throttles: d.reasons}
}
func (d *constDevice) Counters() (provenance.ClockEventCounters, bool) {
	now := time.Now()
	ns := uint64(now.Sub(d.start))
	c := provenance.ClockEventCounters{At: now}
	if d.reasons&provenance.ReasonSWPowerCap != 0 {
		c.SWPowerCapNS = ns
	}
	if d.reasons&provenance.ReasonHWThermal != 0 {
		c.HWThermalNS = ns
	}
	return c, true
}

// TestThrottlingTaintsTheLaunch: a GPU thermally throttled through the
// measured window taints every launch (the statistics leave them out) and
// marks the trial throttled; one at its power cap only is clean, with the
// clock deficit recorded.
func TestThrottlingTaintsTheLaunch(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		reasons uint64
		tainted bool
	}{
		{"hardware thermal slowdown", provenance.ReasonHWThermal | provenance.ReasonSWPowerCap, true},
		{"power cap only", provenance.ReasonSWPowerCap, false},
	} {
		f := newFixture(t, `name: runner-throttle
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cuda, gpus: 1, warmup_steps: 1, steps: 3, timeout: 20s}
`)
		o := f.options()
		o.Machine = &Machine{Device: "cuda", GPUs: []string{"0"}, EngineLib: "fake", NVML: fakeNVML{tc.reasons}}
		o.SampleEvery = 5 * time.Millisecond
		run, err := f.run(t, context.Background(), o)
		require.NoError(t, err)
		require.Len(t, run.Trials, 1)
		tr := run.Trials[0]
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		rp := tr.Repeats[0]
		require.NotNil(t, rp.Throttle, tc.desc)
		require.Len(t, rp.Throttle.GPUs, 1)
		g := rp.Throttle.GPUs[0]
		assert.Equal(t, "counters", g.Source)
		assert.InDelta(t, 1, g.PowerCap, 0.01, tc.desc)
		assert.InDelta(t, 1-1700.0/1980, g.ClockDeficit, 1e-9)
		assert.True(t, rp.Throttle.WindowEnd.After(rp.Throttle.WindowStart))
		assert.Equal(t, tc.tainted, rp.Tainted != "", "%s: %q", tc.desc, rp.Tainted)
		assert.Equal(t, tc.tainted, tr.Throttled, tc.desc)
		if tc.tainted {
			assert.True(t, strings.Contains(rp.Tainted, "hardware thermal slowdown"), rp.Tainted)
			assert.False(t, math.IsNaN(g.HWThermal))
		}
	}
}
