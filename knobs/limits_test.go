package knobs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStringValueLimits (audit N20, B-1/B-8): a string value longer than an
// environment variable may be (it would fail every launch with E2BIG) and a
// C1 control character are refused when the study is validated.
func TestStringValueLimits(t *testing.T) {
	k, ok := Lookup("nccl.socket_ifname")
	require.True(t, ok)
	_, err := k.Canonical(strings.Repeat("e", 200<<10))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "environment variable")
	_, err = k.Canonical("eth\u00850")
	require.Error(t, err)
	v, err := k.Canonical(strings.Repeat("e", 100<<10))
	require.NoError(t, err, "100 KB still fits")
	assert.Len(t, v, 100<<10)
}
