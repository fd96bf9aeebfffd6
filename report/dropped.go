package report

import (
	"maps"
	"slices"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// droppedCombinations takes the combinations the planner dropped out of the
// records: the runner commits each as a record with outcome skipped that is
// not in the plan (so that a resumed run knows it was dealt with). They are
// not trials: they are listed once, with the manifest's own list of drops
// (greedy sweeps drop later rounds' combinations only as records), and
// counted nowhere else. byID loses those records.
func droppedCombinations(m *store.Manifest, byID map[string]*store.TrialRecord) []store.DroppedTrial {
	planned := make(map[string]bool, len(m.Plan))
	for _, p := range m.Plan {
		planned[p.ID] = true
	}
	out := slices.Clone(m.Dropped)
	seen := map[string]bool{}
	for _, d := range out {
		seen[knobKey(d.Knobs)] = true
	}
	var recs []*store.TrialRecord
	for id, rec := range byID {
		if rec.Outcome == store.Skipped && !planned[id] {
			recs = append(recs, rec)
			delete(byID, id)
		}
	}
	slices.SortFunc(recs, func(a, b *store.TrialRecord) int { return b.Index - a.Index }) // committed order: -1, -2, ...
	for _, rec := range recs {
		if k := knobKey(rec.Knobs); !seen[k] {
			seen[k] = true
			out = append(out, store.DroppedTrial{Knobs: rec.Knobs, Reason: rec.Error})
		}
	}
	return out
}

// knobKey is a knob map as one comparable string.
func knobKey(k map[string]string) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(k)) {
		b.WriteString(n + "=" + k[n] + "\n")
	}
	return b.String()
}
