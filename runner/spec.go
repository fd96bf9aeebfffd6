package runner

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/study"
)

// trialSpec is everything needed to launch one trial: its ranks' engine
// configurations, environment and devices.
type trialSpec struct {
	Trial       study.Trial
	Ranks       int
	Launch      knobs.Launch
	Set         map[string]string // environment the knobs set
	Unset       []string          // environment the knobs unset (auto)
	Configs     []engine.Config   // per rank
	Devices     []string          // per rank CUDA_VISIBLE_DEVICES entry ("" on cpu)
	Unsupported string            // why this trial cannot run on this machine
	// NCCLEvidence: the trial forces an nccl.* knob or turns nccl.debug on,
	// or its study sweeps nccl.* (every trial then pays the same logging:
	// sweepsNCCL), so NCCL prints its choices (NCCL_DEBUG=INFO,
	// NCCL_DEBUG_SUBSYS with TUNING) and the runner reads them back from the
	// ranks' logs.
	NCCLEvidence bool
	// NCCLTransport: the trial's ranks form an NCCL communicator, so NCCL
	// prints at init which transport each channel uses (NCCL_DEBUG=INFO,
	// NCCL_DEBUG_SUBSYS with INIT and NET; nothing per collective).
	NCCLTransport bool
}

// buildSpec resolves a trial against the study and the machine.
// hostCPUs is this host's core count (a variable: tests set a larger host).
var hostCPUs = runtime.NumCPU

func buildSpec(s *study.Study, t study.Trial, m *Machine) (*trialSpec, error) {
	ls, err := knobs.LaunchSettings(t.Knobs)
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", t.ID, err)
	}
	if ls.ProcsPerGPU < 1 {
		ls.ProcsPerGPU = 1
	}
	place := s.PlacementFor(t.Knobs, m.Device)
	sp := &trialSpec{Trial: t, Launch: ls, Ranks: place.Ranks}
	sp.Set, sp.Unset = knobs.Environment(t.Knobs)
	sp.NCCLEvidence = wantsNCCLEvidence(t.Knobs)

	base := engine.Config{Family: s.Model.Family, Preset: s.Model.Preset, Layers: s.Model.Layers,
		Hidden: s.Model.Hidden, Device: m.Device, Seed: s.Workload.Seed, Threads: s.Workload.Threads}
	if err := knobs.EngineConfig(t.Knobs, &base); err != nil {
		return nil, fmt.Errorf("trial %s: %w", t.ID, err)
	}
	// The collective deadline until the warm-up shows the step time (the
	// worker then lowers it: warmDeadlineMS).
	base.Dist.TimeoutMS = commDeadlineMS(s.Workload.Timeout.Milliseconds())
	// Ranks that share this host's cores get their share of them: CPU ranks,
	// and a rehearsal's CUDA ranks, whose host-staged collectives copy and
	// reduce on the CPU (8 ranks of 16 threads each on 16 cores took 43 s for
	// one BERT-large ZeRO-1 step on an H100 host, 2026-12-06). torchrun does
	// the same with OMP_NUM_THREADS=1 for several processes a node.
	// A node's cores are shared by the ranks on that node: with several
	// nodes (Slurm; the local launcher refuses them, launch/kind.go)
	// place.RanksPerNode, as srun's --cpus-per-task does (launch/slurm.go),
	// not the whole world; a rehearsal runs every rank on this host.
	if base.Threads == 0 && (m.Device == "cpu" || m.Rehearse) {
		onHost := sp.Ranks
		if !m.Rehearse && place.Nodes > 1 {
			onHost = min(sp.Ranks, place.RanksPerNode)
		}
		base.Threads = max(1, hostCPUs()/max(1, onHost))
	}
	// procs_per_gpu > 1: independent replicas sharing a GPU (the MPS case),
	// each its own world of one; otherwise one data-parallel world.
	world := place.World
	switch {
	case world == 1 && (!(m.DPWorldOfOne || s.Workload.WorldOfOne) || place.ProcsPerGPU > 1):
		base.Dist.Backend = ""
	case m.Device == "cuda":
		base.Dist.Backend = "nccl"
	default:
		base.Dist.Backend = "gloo"
	}
	sp.NCCLTransport = base.Dist.Backend == "nccl"
	sp.setNCCLDebug()
	for r := 0; r < sp.Ranks; r++ {
		c := base
		c.Dist.WorldSize, c.Dist.Rank = world, r
		if world == 1 {
			c.Dist.Rank = 0
		}
		c.Pipeline.Balance = append([]int(nil), base.Pipeline.Balance...)
		sp.Configs = append(sp.Configs, c)
		dev := ""
		if m.Device == "cuda" {
			dev = launch.GPUFor(r%place.RanksPerNode, place.ProcsPerGPU, m.GPUs) // each node numbers its own GPUs
		}
		sp.Devices = append(sp.Devices, dev)
	}
	if m.Rehearse {
		rehearseSpec(sp, m)
	} else if place.GPUsPerNode > len(m.GPUs) {
		sp.Unsupported = fmt.Sprintf("needs %d GPUs per node (%d ranks on %d nodes, procs_per_gpu %d); %d visible",
			place.GPUsPerNode, sp.Ranks, place.Nodes, place.ProcsPerGPU, len(m.GPUs))
	}
	if ls.MPS && m.MPSControl == "" {
		sp.Unsupported = "mps: nvidia-cuda-mps-control not found (looked on PATH and in /usr/local/nvidia/bin)"
	}
	if ls.MPS && m.Device != "cuda" {
		sp.Unsupported = "mps: needs CUDA devices; this trial runs on " + m.Device
	}
	return sp, nil
}

// setNCCLDebug turns NCCL's INFO lines on for a trial that wants evidence
// of its choices or its transport, unless the study set nccl.debug itself.
func (sp *trialSpec) setNCCLDebug() {
	if (sp.NCCLEvidence || sp.NCCLTransport) && isAuto(sp.Trial.Knobs["nccl.debug"]) {
		sp.Set[ncclDebugVar] = "INFO"
		sp.Unset = slices.DeleteFunc(sp.Unset, func(v string) bool { return v == ncclDebugVar })
	}
}

// ncclDebugSubsys is the NCCL_DEBUG_SUBSYS the trial's ranks get when the
// environment sets none: with TUNING for evidence of choices, else the init
// subsystems that name the transport; "" for neither.
func (sp *trialSpec) ncclDebugSubsys() string {
	switch {
	case sp.NCCLEvidence:
		return provenance.NCCLDebugSubsys
	case sp.NCCLTransport:
		return provenance.NCCLTransportSubsys
	}
	return ""
}

// sweepsNCCL says whether a plan sweeps an nccl.* knob (a trial changes one
// from the baseline, or a greedy round varies one): then every trial gets
// the same NCCL debug settings, so that the baseline and the treatments pay
// the same logging inside the measured window.
func sweepsNCCL(plan *study.Plan) bool {
	if plan == nil {
		return false
	}
	for _, k := range plan.Rounds {
		if strings.HasPrefix(k, "nccl.") && k != "nccl.debug" {
			return true
		}
	}
	for _, t := range plan.Trials {
		for _, k := range t.Changed {
			if strings.HasPrefix(k, "nccl.") && k != "nccl.debug" {
				return true
			}
		}
	}
	return false
}

const (
	ncclDebugVar       = "NCCL_DEBUG"
	ncclDebugSubsysVar = "NCCL_DEBUG_SUBSYS"
)

// wantsNCCLEvidence says whether a trial forces an nccl.* knob or turns
// nccl.debug on (INFO or TRACE); an explicit VERSION or WARN is the study's
// choice and stands.
func wantsNCCLEvidence(values map[string]string) bool {
	for k, v := range values {
		switch {
		case k == "nccl.debug":
			if v == "INFO" || v == "TRACE" {
				return true
			}
		case strings.HasPrefix(k, "nccl.") && !isAuto(v):
			return true
		}
	}
	return false
}

func isAuto(v string) bool { return knobs.Unforced(v) }
