package report

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// rankInfos yields every rank of every launch of every trial that reported
// its cs_info, with its trial's ID, in the run's order.
func rankInfos(run *store.Run) iter.Seq2[string, store.RankRecord] {
	return func(yield func(string, store.RankRecord) bool) {
		for _, t := range run.Trials {
			for _, rp := range t.Repeats {
				for _, rk := range rp.Ranks {
					if rk.Info != nil && !yield(t.ID, rk) {
						return
					}
				}
			}
		}
	}
}

// rankGPUs is each GPU the run's ranks reported running on (cs_info's UUID
// and PCI bus id, as the rank itself saw its device: on Slurm the runner
// cannot see it) with the ranks that ran on it, over every launch of every
// trial: "GPU-… (PCI 00000000:1B:00.0, node n1): ranks 0, 2". Empty on the
// CPU or for records without the identity.
func rankGPUs(run *store.Run) []string {
	type dev struct{ uuid, pci, node string }
	ranks := map[dev][]int{}
	var order []dev
	for _, rk := range rankInfos(run) {
		if rk.Info.GPUUUID == "" {
			continue
		}
		d := dev{rk.Info.GPUUUID, rk.Info.PCIBusID, rk.Node}
		if _, ok := ranks[d]; !ok {
			order = append(order, d)
		}
		if !slices.Contains(ranks[d], rk.Rank) {
			ranks[d] = append(ranks[d], rk.Rank)
		}
	}
	for _, d := range order {
		slices.Sort(ranks[d])
	}
	slices.SortStableFunc(order, func(a, b dev) int { return ranks[a][0] - ranks[b][0] })
	var out []string
	for _, d := range order {
		var where []string
		if d.pci != "" {
			where = append(where, "PCI "+d.pci)
		}
		if d.node != "" {
			where = append(where, "node "+d.node)
		}
		s := d.uuid
		if len(where) > 0 {
			s += " (" + strings.Join(where, ", ") + ")"
		}
		rs := make([]string, len(ranks[d]))
		for i, r := range ranks[d] {
			rs[i] = fmt.Sprint(r)
		}
		word := "rank"
		if len(rs) > 1 {
			word = "ranks"
		}
		out = append(out, s+": "+word+" "+strings.Join(rs, ", "))
	}
	return out
}

// bnBufferTrials are the trials that ran a family with BatchNorm (ResNet)
// data parallel over more than one rank, by the ranks' cs_info.
func bnBufferTrials(run *store.Run) []string {
	var ids []string
	for id, rk := range rankInfos(run) {
		if i := rk.Info; strings.HasPrefix(i.Family, "resnet") && i.WorldSize > 1 && i.Pipeline == nil && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// bnBufferFact is the report's statement of the BatchNorm-buffer policy for
// its ResNet data-parallel trials ("" when it has none): the parameters are
// broadcast from rank 0 once, at start; BatchNorm's running statistics are
// never broadcast, where PyTorch DDP's default broadcast_buffers=True
// broadcasts them from rank 0 before every forward
// (docs/data-parallel.md, "The gradient reducer").
func bnBufferFact(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("parameters broadcast from rank 0 once, at start; BatchNorm running statistics never broadcast "+
		"(each rank keeps its own), unlike PyTorch DDP's default broadcast_buffers=True, which broadcasts them before every forward: "+
		"one collective per step fewer than a default DDP run (ResNet data-parallel trials: %s)", strings.Join(ids, ", "))
}
