package study

import (
	"fmt"

	"github.com/casestudy/casestudy/knobs"
)

// gpusAll is workload.gpus: all as decoded, before build turns it into
// Workload.GPUsAll.
const gpusAll = -1

// ResolveGPUs gives a study whose workload.gpus is all the GPUs of the node
// it plans for (n; 0, a machine without GPUs, plans for 1): on one GPU it
// plans what gpus: 1 plans, and on more the data-parallel trials a single GPU
// drops. Studies with a number keep it.
func (s *Study) ResolveGPUs(n int) {
	if !s.Workload.GPUsAll || s.Workload.Device == "cpu" {
		return
	}
	n = max(n, 1)
	s.SetGPUs(n)
	s.Notes = append(s.Notes, fmt.Sprintf("workload.gpus: all is %d GPU(s) on this node", n))
}

// SetGPUs sets the GPUs per node a trial uses and the ranks they imply (on
// cuda). A baseline the new placement cannot run is adapted, with a note:
// graphs: true captures one rank's step only, so with more than one rank in
// the communicator the baseline runs graphs: false (on one GPU it stays true,
// and a swept graphs: true is dropped with its reason).
func (s *Study) SetGPUs(n int) {
	w := &s.Workload
	w.GPUs = n
	if w.Device == "cuda" {
		w.Ranks = s.RanksFor(s.Baseline)
	}
	if s.Baseline["graphs"] == "true" && s.WorldFor(s.Baseline) > 1 {
		k, _ := knobs.Lookup("graphs")
		s.Baseline["graphs"] = k.Default
		s.Notes = append(s.Notes, fmt.Sprintf("baseline graphs: true became %s: the engine captures one rank's step only, and %d GPUs put %d ranks in the communicator",
			k.Default, n, s.WorldFor(s.Baseline)))
	}
}
