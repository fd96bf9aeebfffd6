package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWallMSAfterAClockStep (audit N22, T-3): a timeline whose End precedes
// its Start (the wall clock stepped back mid-launch) is as long as its
// phases, never negative.
func TestWallMSAfterAClockStep(t *testing.T) {
	start := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	tl := &Timeline{Start: start, End: start.Add(-10 * 24 * time.Hour),
		Phases: []Phase{{Name: "spawn", MS: 120}, {Name: "measured", MS: 880}}}
	assert.Equal(t, 1000.0, tl.WallMS())
	tl.End = start.Add(1500 * time.Millisecond)
	assert.Equal(t, 1500.0, tl.WallMS())
}
