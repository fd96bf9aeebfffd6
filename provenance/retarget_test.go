package provenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSamplerRetarget: once the ranks report their GPUs, the sampler reads
// those instead of the runner's guess, and the samples it took of a guessed
// GPU the ranks do not use are dropped; a sampler without devices stays
// without.
func TestSamplerRetarget(t *testing.T) {
	idle := func(time.Duration) uint64 { return 0 }
	guess := &fakeDevice{index: 0, start: time.Now(), reasons: idle}
	own := &fakeDevice{index: 2, start: time.Now(), reasons: idle}
	s := StartSampler([]Device{guess}, time.Millisecond)
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.samples) > 0 }, 5*time.Second, time.Millisecond)
	s.Retarget([]Device{own})
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.samples) > 1 }, 5*time.Second, time.Millisecond)
	got := s.Stop()
	require.NotEmpty(t, got)
	for _, g := range got {
		assert.Equal(t, 2, g.GPU, "only the ranks' own GPU")
	}

	none := StartSampler(nil, time.Millisecond)
	none.Retarget([]Device{own})
	assert.Empty(t, none.Stop())
}
