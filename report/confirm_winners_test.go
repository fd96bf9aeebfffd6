package report

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/stats"
)

// A trial faster than the baseline whose interval does not clear the study's
// threshold is no winner: not in the confirmation study, and its recipe
// caveat does not call it "decided faster".
func TestWinnersRespectTheThreshold(t *testing.T) {
	cmp := func(r float64, p stats.Practical) *stats.Comparison {
		return &stats.Comparison{Ratio: r, Verdict: stats.Better, Practical: p}
	}
	s := &Summary{Trials: []Trial{
		{ID: "base", Baseline: true, Knobs: map[string]string{"micro_batch": "16"}},
		{ID: "beyond", Knobs: map[string]string{"micro_batch": "64"}, Changed: []string{"micro_batch"}, VsBaseline: cmp(1.20, stats.Beyond)},
		{ID: "straddles", Best: true, Knobs: map[string]string{"micro_batch": "32"}, Changed: []string{"micro_batch"},
			VsBaseline: cmp(1.04, stats.Unresolved)},
	}}
	var ids []string
	for _, w := range winners(s) {
		ids = append(ids, w.ID)
	}
	assert.Equal(t, []string{"beyond"}, ids)
	caveats := recipeCaveats(s, &Measured{GlobalBatch: 16})
	assert.Len(t, caveats, 2)
	assert.Contains(t, caveats[0], "(decided faster)")
	assert.Contains(t, caveats[1], "(the best trial, faster but by more than the threshold not shown)")
}
