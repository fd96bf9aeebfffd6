package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFP8Drops: the planner drops precision fp8 where it cannot run, with the
// reason: on cpu, for resnet50, and on a node whose GPUs are older than
// compute capability 8.9 (where the command that plans read it); an
// fp8.scaling sweep without precision fp8 has no effect.
func TestFP8Drops(t *testing.T) {
	sweep := "sweep: {strategy: grid, knobs: {precision: [bf16, fp8]}}\n"
	p := expandText(t, "name: x\nmodel: {family: gpt, preset: tiny}\nworkload: {device: cpu}\n"+sweep, ExpandOptions{})
	assert.Equal(t, []string{"precision=bf16"}, changedSets(p))
	require.Len(t, p.Dropped, 1)
	assert.Contains(t, p.Dropped[0].Reason, "precision=fp8 needs FP8 tensor cores")
	assert.Contains(t, p.Dropped[0].Reason, "this study runs on cpu")

	p = expandText(t, "name: x\nmodel: {family: resnet50, preset: tiny}\nworkload: {device: cuda, gpus: 1}\n"+sweep, ExpandOptions{})
	require.Len(t, p.Dropped, 1)
	assert.Contains(t, p.Dropped[0].Reason, "resnet50 is convolutions")

	gpu := "name: x\nmodel: {family: gpt, preset: 124m}\nworkload: {device: cuda, gpus: 1}\n"
	for cc, dropped := range map[int]bool{0: false, 80: true, 89: false, 90: false} {
		s := loadText(t, gpu+sweep)
		s.Workload.ComputeCap = cc
		p, err := Expand(s, ExpandOptions{})
		require.NoError(t, err)
		if dropped {
			require.Len(t, p.Dropped, 1, "compute capability %d", cc)
			assert.Contains(t, p.Dropped[0].Reason, "this node's GPUs are 8.0")
		} else {
			assert.Empty(t, p.Dropped, "compute capability %d", cc)
			assert.Len(t, p.Trials, 2)
		}
	}

	p = expandText(t, gpu+"sweep: {strategy: grid, knobs: {precision: [bf16, fp8], fp8.scaling: [tensor, row]}}\n", ExpandOptions{})
	assert.Equal(t, []string{"precision=bf16", "precision=fp8", "fp8.scaling=row precision=fp8"}, changedSets(p))
	assert.Equal(t, []string{"fp8.scaling=row precision=bf16: fp8.scaling=row has no effect unless precision is fp8 (precision=bf16)"}, reasons(p))
}
