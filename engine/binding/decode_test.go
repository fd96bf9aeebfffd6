package binding

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
)

// TestDecodeNonFiniteStep (audit N4): cs_steps answering a null loss (the
// engine's NaN) is a runtime error that names the step and the metric, so the
// launch fails with that reason.
func TestDecodeNonFiniteStep(t *testing.T) {
	var ms []engine.StepMetrics
	err := decode("cs_steps", `[{"step":0,"loss":3.1,"grad_norm":0.9},{"step":1,"loss":null,"grad_norm":null}]`, &ms)
	var ee *engine.Error
	require.True(t, errors.As(err, &ee), "%v", err)
	assert.Equal(t, engine.StatusRuntime, ee.Status)
	assert.Contains(t, ee.Msg, "step 1: [grad_norm loss] are not a finite number")
	assert.NotContains(t, ee.Msg, "invalid JSON")
}
