package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/study"
)

// TestRehearsalStepsTurnsTheTimeFloorsOff: a rehearsal on a GPU runs its
// planned steps, not the measured runs' 2 s warm-up and 5 s window (the first
// H100 rehearsal ran 21 warm-up steps and 23 measured ones instead of 1 and 4).
func TestRehearsalStepsTurnsTheTimeFloorsOff(t *testing.T) {
	w := study.Workload{WarmupSteps: 5, Steps: 50, WarmupSeconds: -1, MeasureSeconds: -1, Repeats: 5}
	RehearsalSteps(&w, false, false)
	warmup, measure := w.Windows("cuda")
	assert.Zero(t, warmup)
	assert.Zero(t, measure)
	assert.Equal(t, 1, w.WarmupSteps)
	assert.Equal(t, 4, w.Steps)
	assert.Equal(t, 1, w.Repeats)
}
