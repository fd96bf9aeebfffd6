package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTensorParallelPlan: a study's tp sweep is judged with the model's heads
// (gpt 774m: 20) and the placement (2 nodes of 4 GPUs: groups of 8 span
// nodes, refused unless sweep.allow_tp_across_nodes), and the dp constraint
// variable counts ranks / tp.degree.
func TestTensorParallelPlan(t *testing.T) {
	base := "name: x\nmodel: {family: gpt, preset: 774m}\nworkload: {device: cuda, gpus: 4, nodes: 2}\nbaseline: {graphs: false}\n"
	p := expandText(t, base+"sweep: {strategy: grid, knobs: {tp.degree: [1, 2, 4, 8]}}\n", ExpandOptions{})
	assert.Equal(t, []string{"", "tp.degree=2", "tp.degree=4"}, changedSets(p))
	require.Len(t, p.Dropped, 1)
	assert.Contains(t, p.Dropped[0].Reason, "does not divide the 20 attention heads of gpt 774m")

	base = "name: x\nmodel: {family: gpt, preset: 350m}\nworkload: {device: cuda, gpus: 4, nodes: 2}\nbaseline: {graphs: false}\n"
	p = expandText(t, base+"sweep: {strategy: grid, knobs: {tp.degree: [4, 8]}}\n", ExpandOptions{})
	require.Len(t, p.Dropped, 1)
	assert.Contains(t, p.Dropped[0].Reason, "a tensor group would span nodes")
	assert.Contains(t, p.Dropped[0].Reason, "sweep.allow_tp_across_nodes: true")
	p = expandText(t, base+"sweep: {strategy: grid, knobs: {tp.degree: [4, 8]}, allow_tp_across_nodes: true}\n", ExpandOptions{})
	assert.Empty(t, p.Dropped)
	assert.Len(t, p.Trials, 2)

	p = expandText(t, base+"sweep: {strategy: grid, knobs: {tp.degree: [1, 2, 4]}, constraints: [\"dp >= 4\"]}\n", ExpandOptions{})
	assert.Equal(t, []string{"", "tp.degree=2"}, changedSets(p), "dp = 8 ranks / tp.degree")

	rn := expandText(t, "name: x\nmodel: {family: resnet50, preset: \"50\"}\nworkload: {device: cuda, gpus: 8}\nbaseline: {graphs: false}\n"+
		"sweep: {strategy: grid, knobs: {tp.degree: [1, 2]}}\n", ExpandOptions{})
	require.Len(t, rn.Dropped, 1)
	assert.Contains(t, rn.Dropped[0].Reason, "ResNet-50 is not tensor-parallel")
}
