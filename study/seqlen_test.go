package study

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSeqLenBeyondPositionsIsDropped (audit N20, E-14): a seq_len the
// preset's position embedding cannot take is dropped by the plan with the
// reason, not launched to fail.
func TestSeqLenBeyondPositionsIsDropped(t *testing.T) {
	s := &Study{Model: Model{Family: "gpt", Preset: "tiny"}}
	assert.Contains(t, s.seqLenReason(map[string]string{"seq_len": "1000000000"}), "exceeds the 256 positions of gpt tiny")
	assert.Empty(t, s.seqLenReason(map[string]string{"seq_len": "256"}))
	s.Model = Model{Family: "resnet50", Preset: "50"}
	assert.Empty(t, s.seqLenReason(map[string]string{"seq_len": "100000"}), "no sequence")
	require.Empty(t, (&Study{Model: Model{Family: "bert", Preset: "large"}}).seqLenReason(map[string]string{"seq_len": "512"}))
}
