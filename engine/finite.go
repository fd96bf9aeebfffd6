package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// The engine writes a number that is not finite (NaN, ±Inf) as JSON null
// (nlohmann::json has no other spelling for it). Decoded into a float64 a
// null would read as 0, and a loss of 0 is "not recorded": a diverged trial
// would pass as a good one. StepMetrics therefore refuses a null number.

// NonFiniteError is a step whose metric is not a finite number: the launch
// fails with it.
type NonFiniteError struct {
	Step   int
	Fields []string // the JSON names of the metrics, sorted
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("step %d: %v not a finite number (NaN or infinity; the engine wrote null): "+
		"the training is numerically broken in this configuration (a learning rate, loss scale or precision that diverges)",
		e.Step, plural(e.Fields))
}

func plural(fields []string) string {
	if len(fields) == 1 {
		return fields[0] + " is"
	}
	return fmt.Sprint(fields) + " are"
}

// UnmarshalJSON decodes a step's metrics and refuses a null number. A null
// grad_norm is allowed in a skipped step (fp16: the loss scaler skipped it
// for inf/NaN gradients, which is what skipped says).
func (m *StepMetrics) UnmarshalJSON(b []byte) error {
	type plain StepMetrics
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("null")) { // the usual case: no further work
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return err
	}
	var bad []string
	for k, v := range fields {
		if string(bytes.TrimSpace(v)) != "null" || k == "buckets" || k == "stages" {
			continue
		}
		if k == "grad_norm" && m.Skipped {
			continue
		}
		bad = append(bad, k)
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return &NonFiniteError{Step: m.Step, Fields: bad}
}
