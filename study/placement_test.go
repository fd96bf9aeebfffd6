package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlacementFor(t *testing.T) {
	const head = "name: p\nmodel: {family: gpt, preset: tiny}\n"
	for _, tc := range []struct {
		desc   string
		text   string
		values map[string]string
		device string
		want   Placement
	}{
		{"cpu ranks", head + "workload: {device: cpu, ranks: 4}\n", nil, "cpu",
			Placement{Ranks: 4, World: 4, Nodes: 1, RanksPerNode: 4, ProcsPerGPU: 1}},
		{"one GPU per rank", head + "workload: {device: cuda, gpus: 8}\n", nil, "cuda",
			Placement{Ranks: 8, World: 8, Nodes: 1, RanksPerNode: 8, ProcsPerGPU: 1, GPUsPerNode: 8}},
		{"two nodes", head + "workload: {device: cuda, gpus: 4, nodes: 2}\n", nil, "cuda",
			Placement{Ranks: 8, World: 8, Nodes: 2, RanksPerNode: 4, ProcsPerGPU: 1, GPUsPerNode: 4}},
		{"replicas sharing GPUs", head + "workload: {device: cuda, gpus: 2}\n", map[string]string{"procs_per_gpu": "4"}, "cuda",
			Placement{Ranks: 8, World: 1, Nodes: 1, RanksPerNode: 8, ProcsPerGPU: 4, GPUsPerNode: 2}},
		{"auto counts as cuda", head + "workload: {gpus: 2}\n", nil, "",
			Placement{Ranks: 2, World: 2, Nodes: 1, RanksPerNode: 2, ProcsPerGPU: 1, GPUsPerNode: 2}},
		{"auto resolved to cpu takes workload.ranks", head + "workload: {gpus: 2, ranks: 3}\n", nil, "cpu",
			Placement{Ranks: 3, World: 3, Nodes: 1, RanksPerNode: 3, ProcsPerGPU: 1}},
		{"auto resolved to cpu without ranks: one", head + "workload: {gpus: 2}\n", nil, "cpu",
			Placement{Ranks: 1, World: 1, Nodes: 1, RanksPerNode: 1, ProcsPerGPU: 1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := loadText(t, tc.text)
			values := s.Resolve(tc.values)
			assert.Equal(t, tc.want, s.PlacementFor(values, tc.device))
			if tc.device == "" || tc.device == s.Workload.Device {
				assert.Equal(t, tc.want.Ranks, s.RanksFor(values))
				assert.Equal(t, tc.want.World, s.WorldFor(values))
			}
		})
	}
}
