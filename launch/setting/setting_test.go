package setting

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTimeLimit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{"30", 30}, {"30:30", 31}, {"2:00:00", 120}, {"1-12", 36 * 60}, {"1-00:30", 24*60 + 30},
		{"0-0:0:59", 1}, {"90m", 90}, {"2h30m", 150}, {"45s", 1},
	} {
		got, err := ParseTimeLimit(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	for _, in := range []string{"", "0", "abc", "-5m", "1:2:3:4"} {
		_, err := ParseTimeLimit(in)
		assert.Error(t, err, in)
	}
}
