package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/store"
)

// TestPowerAndBasis: the power limiter's cost is the mean over clean
// launches (a tainted one left out), and the method text says what a
// launch's samples/s divide by.
func TestPowerAndBasis(t *testing.T) {
	th := func(d, c float64) *store.Throttle {
		return &store.Throttle{GPUs: []store.GPUThrottle{{ClockDeficit: d, PowerCap: c}}}
	}
	rec := &store.TrialRecord{ID: "a", Outcome: store.OK, Repeats: []store.RepeatRecord{
		{Outcome: store.OK, Throttle: th(0.10, 0.9), Basis: meas.WindowBasis},
		{Outcome: store.OK, Throttle: th(0.14, 1.0), Basis: meas.WindowBasis},
		{Outcome: store.OK, Throttle: th(0.5, 1.0), Tainted: "thermal", Basis: meas.WindowBasis},
	}}
	p := powerOf(rec)
	require.NotNil(t, p)
	assert.InDelta(t, 0.12, p.ClockDeficit, 1e-12)
	assert.InDelta(t, 0.95, p.PowerCapShare, 1e-12)
	assert.Equal(t, 2, p.Launches)
	assert.Nil(t, powerOf(&store.TrialRecord{Repeats: []store.RepeatRecord{{Outcome: store.OK}}}))

	s := &Summary{Trials: []Trial{{ID: "a", Label: "micro_batch=32", Power: p}}}
	assert.Equal(t, "Power limit in the measured window (SM clock below its maximum; share of the window capped by power), "+
		"mean over clean launches: micro_batch=32 −12.0% (95%).", PowerText(s))

	s.Trials = append(s.Trials, Trial{ID: "b", Label: "baseline", Power: &Power{Launches: 3}})
	assert.NotContains(t, PowerText(s), "baseline", "a trial that was not capped is not listed")
	assert.Equal(t, "Power limit: no trial's GPU was capped by power in its measured windows.", PowerText(&Summary{Trials: s.Trials[1:]}))

	assert.Equal(t, meas.WindowBasis, basisOf([]store.TrialRecord{*rec}))
	old := store.TrialRecord{Repeats: []store.RepeatRecord{{Outcome: store.OK}}}
	assert.Equal(t, "steps", basisOf([]store.TrialRecord{old}))
	assert.Equal(t, "mixed", basisOf([]store.TrialRecord{*rec, old}))
	assert.Contains(t, basisText(meas.WindowBasis), "over the measured window's wall clock")
}
