package timeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// TestEstimateAfterAClockStep (audit N22, T-3): launches whose End precedes
// their Start (the clock stepped back) never give a negative estimate; with
// every launch's End stepped far back, the estimate still adds up from the
// phases.
func TestEstimateAfterAClockStep(t *testing.T) {
	h := run("results/gpt/a", map[string][2]float64{"aaaa": {4000, 25}}, 10, 50, 3)
	for i := range h.Trials {
		for j := range h.Trials[i].Repeats {
			tl := h.Trials[i].Repeats[j].Timeline
			tl.End = tl.Start.Add(-118035 * time.Hour)
		}
	}
	e := EstimatePlan([]*store.Run{h}, Plan{Trials: []string{"aaaa"}, Repeats: 1, WarmupSteps: 10, Steps: 50})
	require.NotNil(t, e)
	assert.Greater(t, e.Total, time.Duration(0))
	assert.Less(t, e.Total, time.Hour)
}
