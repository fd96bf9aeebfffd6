package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseThresholdRefusesNaN (audit N2, M-2): NaN compares false with
// everything, so a NaN threshold would pass every regression; it is refused
// like any other non-positive value, and so are the infinities.
func TestParseThresholdRefusesNaN(t *testing.T) {
	for _, s := range []string{"NaN", "nan", "nan%", "NAN%", " NaN ", "-nan", "+Inf", "inf%", "-Inf"} {
		_, err := ParseThreshold(s)
		assert.Error(t, err, s)
	}
	v, err := ParseThreshold("5%")
	assert.NoError(t, err)
	assert.InDelta(t, 0.05, v, 1e-12)
}
