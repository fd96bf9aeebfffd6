package measure

import (
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Best is the one definition of "best trial", shared by greedy search, the
// report's headline and the checklist: among trials that finished ok with a
// clean launch, the best geometric mean of the objective over clean launches
// (highest, or lowest for step time and memory); a tie keeps the earlier
// trial in the given order. It returns -1 when no trial qualifies.
func Best(recs []*store.TrialRecord, m stats.Metric) int {
	best, bestV := -1, 0.0
	for i, r := range recs {
		if r == nil || r.Outcome != store.OK {
			continue
		}
		l := TrialLaunches(r, m)
		if l.N() == 0 {
			continue
		}
		v := stats.ValueOf(l.Values, 0.95).Center
		if best < 0 || (m.HigherIsBetter && v > bestV) || (!m.HigherIsBetter && v < bestV) {
			best, bestV = i, v
		}
	}
	return best
}
