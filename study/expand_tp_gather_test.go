package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestExpandTPGatherOverlap: a sweep of zero.overlap_gather under tp.degree 2
// on CUDA drops the trial that changes it (NCCL groups keep the all-gathers
// in the step: knobs.tpGatherInStep); a rehearsal (workload.rehearse, as run
// --rehearse and plan --rehearse set it) keeps both.
func TestExpandTPGatherOverlap(t *testing.T) {
	const sweep = `baseline: {precision: bf16, graphs: false, tp.degree: 2, zero.stage: 1}
sweep:
  strategy: grid
  knobs:
    zero.overlap_gather: [true, false]
`
	p := expandText(t, gpu8+sweep, ExpandOptions{})
	assert.Equal(t, []string{""}, changedSets(p))
	if assert.Len(t, p.Dropped, 1) {
		assert.Contains(t, p.Dropped[0].Reason, "zero.overlap_gather=false has no effect with tp.degree=2 on device cuda")
	}
	rehearsed := "name: x\nmodel: {family: gpt, preset: 124m}\nworkload: {device: cuda, gpus: 8, rehearse: true}\n"
	p = expandText(t, rehearsed+sweep, ExpandOptions{})
	assert.Equal(t, []string{"", "zero.overlap_gather=false"}, changedSets(p))
	assert.Empty(t, p.Dropped)
}
