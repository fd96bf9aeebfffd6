package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A multi-node trial needs its GPUs per node: 2 nodes x 2 GPUs run on nodes
// that each show 2 GPUs, every node numbering its own.
func TestMultiNodeGPUs(t *testing.T) {
	s, p := loadStudy(t, "name: s\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cuda, gpus: 2, nodes: 2}\n")
	m := &Machine{GPUs: []string{"0", "1"}}
	require.NoError(t, resolveDevice(s, p, m), "2 GPUs per node are enough")
	sp, err := buildSpec(s, p.Trials[0], m)
	require.NoError(t, err)
	assert.Equal(t, 4, sp.Ranks)
	assert.Empty(t, sp.Unsupported)
	assert.Equal(t, []string{"0", "1", "0", "1"}, sp.Devices)
	assert.Equal(t, 4, sp.Configs[3].Dist.WorldSize)
	assert.Equal(t, 3, sp.Configs[3].Dist.Rank)

	m = &Machine{GPUs: []string{"0"}}
	assert.Error(t, resolveDevice(s, p, m), "1 GPU per node is not")
	sp, err = buildSpec(s, p.Trials[0], &Machine{Device: "cuda", GPUs: []string{"0"}})
	require.NoError(t, err)
	assert.Contains(t, sp.Unsupported, "needs 2 GPUs per node (4 ranks on 2 nodes")
}
