package rendezvous

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusalFloodIsSummarized (audit N13, R-9): 200 refused joins log
// noiseLines lines and one summary at Close, not 200 lines; a rank still
// joins.
func TestRefusalFloodIsSummarized(t *testing.T) {
	s, logged := listen(t, 1)
	for i := 0; i < 200; i++ {
		_, _, err := Dial(ctx(t), s.Addr(), "wrong", 0)
		require.True(t, errors.Is(err, ErrRefused), "%v", err)
	}
	c, _, err := Dial(ctx(t), s.Addr(), "secret", 0)
	require.NoError(t, err)
	c.Close()
	s.Close()
	lines := *logged
	assert.LessOrEqual(t, len(lines), noiseLines+1, strings.Join(lines, "\n"))
	require.NotEmpty(t, lines)
	assert.Contains(t, lines[len(lines)-1], "190 more refused or dropped connections were not shown")
}
