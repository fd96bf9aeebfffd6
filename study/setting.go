package study

import (
	"fmt"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/knobs"
)

// setting is what knobs.Check needs to know about a trial beyond its knob
// values: where its ranks run and the model's heads and vocabulary (what
// tensor parallelism splits; engine.ShapeOf, no library needed).
func (s *Study) setting(values map[string]string) knobs.Setting {
	p := s.PlacementFor(values, "")
	out := knobs.Setting{Device: s.Workload.Device, Ranks: p.Ranks, World: p.World, AllowNVLS: s.Sweep.AllowNVLS,
		Family: s.Model.Family, ComputeCap: s.Workload.ComputeCap,
		Model: fmt.Sprintf("%s %s", s.Model.Family, s.Model.Preset), Nodes: p.Nodes, RanksPerNode: p.RanksPerNode,
		AllowTPAcrossNodes: s.Sweep.AllowTPAcrossNodes, Rehearse: s.Workload.Rehearse}
	if sh, ok := engine.ShapeOf(s.Model.Family, s.Model.Preset, s.Model.Layers, s.Model.Hidden); ok {
		out.Heads = sh.Heads
	}
	return out
}
