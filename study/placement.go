package study

import (
	"strconv"

	"github.com/casestudy/casestudy/knobs"
)

// Placement is where a trial's ranks run: the one computation the planner,
// preflight, the runner and --submit's batch job all use.
type Placement struct {
	Ranks        int // processes of one launch
	World        int // ranks of one communicator: Ranks, or 1 for independent replicas (procs_per_gpu > 1)
	Nodes        int
	RanksPerNode int // Ranks spread evenly over Nodes (rounded up)
	ProcsPerGPU  int // ranks that share one GPU
	GPUsPerNode  int // GPUs each node needs; 0 on cpu
}

// PlacementFor places a trial with these knob values on device: the study's
// workload.device, or what preflight resolved it to ("cpu" | "cuda"; "auto"
// counts as cuda). On cpu a launch runs workload.ranks (1 unless set); on cuda gpus x nodes
// x procs_per_gpu. procs_per_gpu > 1 starts independent replicas sharing the
// GPUs (the MPS case), each a world of one.
func (s *Study) PlacementFor(values map[string]string, device string) Placement {
	w := s.Workload
	p := Placement{Nodes: max(w.Nodes, 1), ProcsPerGPU: procsPerGPU(values, s.Baseline)}
	if device == "" {
		device = w.Device
	}
	cpu := device == "cpu"
	if cpu { // device cpu, or auto on a machine without GPUs
		p.Ranks = max(w.Ranks, 1)
	} else {
		p.Ranks = max(w.GPUs, 1) * p.Nodes * p.ProcsPerGPU
	}
	p.World = p.Ranks
	if p.ProcsPerGPU > 1 {
		p.World = 1
	}
	p.RanksPerNode = max((p.Ranks+p.Nodes-1)/p.Nodes, 1)
	if !cpu {
		p.GPUsPerNode = (p.RanksPerNode + p.ProcsPerGPU - 1) / p.ProcsPerGPU
	}
	return p
}

// RanksFor is PlacementFor(values, workload.device).Ranks.
func (s *Study) RanksFor(values map[string]string) int {
	return s.PlacementFor(values, "").Ranks
}

// WorldFor is PlacementFor(values, workload.device).World.
func (s *Study) WorldFor(values map[string]string) int {
	return s.PlacementFor(values, "").World
}

// DataParallelFor is WorldFor divided by the trial's tp.degree x
// pipeline.stages (knobs.LayoutOf).
func (s *Study) DataParallelFor(values map[string]string) int {
	return knobs.LayoutOf(values, s.WorldFor(values)).DP
}

// procsPerGPU is the trial's procs_per_gpu (its own value, else the
// baseline's), at least 1.
func procsPerGPU(values, baseline map[string]string) int {
	v, ok := values["procs_per_gpu"]
	if !ok {
		v = baseline["procs_per_gpu"]
	}
	ppg, err := strconv.Atoi(v)
	if err != nil || ppg < 1 {
		return 1
	}
	return ppg
}
