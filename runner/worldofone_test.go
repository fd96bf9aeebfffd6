package runner

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScalingReferenceIsAWorldOfOne: workload.world_of_one runs a one-rank
// trial as a data-parallel world of one (the reducer, and the host sync every
// step that data parallel has), as the shipped 1-GPU scaling references
// (studies/*/ddp1-quick.yaml) ask; their G-GPU studies keep one world of G.
// Replicas sharing a GPU stay without a communicator.
func TestScalingReferenceIsAWorldOfOne(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1, world_of_one: true}\n")
	sp, err := buildSpec(s, p.Trials[0], &Machine{Device: "cpu"})
	require.NoError(t, err)
	assert.Equal(t, "gloo", sp.Configs[0].Dist.Backend)
	assert.Equal(t, 1, sp.Configs[0].Dist.WorldSize)

	s, p = loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 1, world_of_one: true}\nbaseline: {procs_per_gpu: 2}\n")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cuda", GPUs: []string{"0"}})
	require.NoError(t, err)
	for _, c := range sp.Configs {
		assert.Equal(t, "", c.Dist.Backend, "replicas stay worlds of one without a communicator")
	}

	cuda := &Machine{Device: "cuda", GPUs: []string{"0", "1", "2", "3", "4", "5", "6", "7"}}
	for _, model := range []string{"gpt", "bert", "resnet50"} {
		for _, g := range []int{1, 2, 8} {
			path := filepath.Join("..", "studies", model, fmt.Sprintf("ddp%d-quick.yaml", g))
			s, p := loadPlan(t, path)
			sp, err := buildSpec(s, p.Trials[0], cuda)
			require.NoError(t, err, path)
			assert.Equal(t, "nccl", sp.Configs[0].Dist.Backend, path)
			assert.Equal(t, g, sp.Configs[0].Dist.WorldSize, path)
		}
	}
}
