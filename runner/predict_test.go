package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A world of one keeps the data-parallel path (backend set, so the engine
// builds the reducer) only when the run asks for prediction inputs, and never
// for replicas sharing a GPU (each its own world).
func TestDPWorldOfOneKeepsTheBackend(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu, ranks: 1}\n")
	sp, err := buildSpec(s, p.Trials[0], &Machine{Device: "cpu"})
	require.NoError(t, err)
	assert.Equal(t, "", sp.Configs[0].Dist.Backend, "a plain world of one runs without the reducer")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cpu", DPWorldOfOne: true})
	require.NoError(t, err)
	assert.Equal(t, "gloo", sp.Configs[0].Dist.Backend)
	assert.Equal(t, 1, sp.Configs[0].Dist.WorldSize)
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cuda", GPUs: []string{"0"}, DPWorldOfOne: true})
	require.NoError(t, err)
	assert.Equal(t, "nccl", sp.Configs[0].Dist.Backend)

	s, p = loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 1}\nbaseline: {procs_per_gpu: 2}\n")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cuda", GPUs: []string{"0"}, DPWorldOfOne: true})
	require.NoError(t, err)
	for _, c := range sp.Configs {
		assert.Equal(t, "", c.Dist.Backend, "replicas stay worlds of one without a communicator")
	}
}
