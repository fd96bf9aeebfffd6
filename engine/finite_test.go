package engine

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNullMetricIsNotFinite (audit N4, E-1): the engine writes NaN as null;
// decoded it must fail, not read as a loss of 0. A skipped fp16 step may
// have a null grad_norm.
func TestNullMetricIsNotFinite(t *testing.T) {
	var ms []StepMetrics
	err := json.Unmarshal([]byte(`[{"step":0,"loss":2.5,"grad_norm":1},{"step":1,"loss":null,"grad_norm":null,"step_ms":3}]`), &ms)
	var nf *NonFiniteError
	require.True(t, errors.As(err, &nf), "%v", err)
	assert.Equal(t, 1, nf.Step)
	assert.Equal(t, []string{"grad_norm", "loss"}, nf.Fields)
	assert.Contains(t, err.Error(), "step 1: [grad_norm loss] are not a finite number")

	var m StepMetrics
	require.NoError(t, json.Unmarshal([]byte(`{"step":4,"loss":2.5,"grad_norm":null,"skipped":true,"loss_scale":32768}`), &m))
	assert.True(t, m.Skipped)
	require.Error(t, json.Unmarshal([]byte(`{"step":4,"loss":2.5,"grad_norm":null,"skipped":false}`), &m))

	require.NoError(t, json.Unmarshal([]byte(`{"step":2,"loss":1.25,"grad_norm":0.5,"buckets":null}`), &m))
	assert.Equal(t, 1.25, m.Loss)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	var back StepMetrics
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, m.Loss, back.Loss)
}
