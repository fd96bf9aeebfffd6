package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNVLSFact: every report states NVLink multicast; a trial that forced
// NVLS under sweep.allow_nvls is named.
func TestNVLSFact(t *testing.T) {
	s := &Summary{Trials: []Trial{{ID: "a", Knobs: map[string]string{"nccl.algo": "Ring"}}, {ID: "b", Knobs: map[string]string{}}}}
	assert.Equal(t, "off (NCCL_NVLS_ENABLE=0 in every trial)", nvlsFact(s))
	s.Trials = append(s.Trials, Trial{ID: "c", Knobs: map[string]string{"nccl.algo": "NVLSTree"}})
	assert.Contains(t, nvlsFact(s), "except in 1 trial(s) forcing nccl.algo NVLS or NVLSTree (sweep.allow_nvls): c")
	assert.Contains(t, provenanceRows(&Summary{}), [2]string{"NVLink multicast", "off (NCCL_NVLS_ENABLE=0 in every trial)"}, "even a report without trials says it")
}
