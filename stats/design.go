package stats

import (
	"github.com/casestudy/casestudy/store"
)

// Design is a run's launch schedule and statistical design, as recorded in
// manifest.json (store.Measurement).
//
// Fixed repeats: every trial gets Repeats clean launches and comparisons are
// decided once, at confidence 1-Alpha.
//
// repeats: auto is a group-sequential design: launches run in interleaved
// rounds; after each round listed in Looks every undecided comparison with
// the baseline is tested, and a decided trial stops. Peeking is paid for by
// splitting Alpha over the looks plus the final analysis of the report
// (Bonferroni over looks: the overall false-positive rate of a comparison is
// at most Alpha whatever the stopping rule; simulated rates in
// docs/reports.md).
type Design store.Measurement

// Defaults of repeats: auto.
const (
	DefaultMinRepeats    = 5
	DefaultMaxRepeats    = 20
	DefaultMaxRelaunches = 2
)

// lookPoints are the rounds auto may look at, between min and max.
var lookPoints = []int{5, 8, 12, 20, 30, 45, 70, 100}

// Looks are the rounds at which repeats: auto decides, for min and max
// launches per trial: min, the points 5, 8, 12, 20, 30, ... in between, and max.
func Looks(minRepeats, maxRepeats int) []int {
	looks := []int{minRepeats}
	for _, p := range lookPoints {
		if p > minRepeats && p < maxRepeats {
			looks = append(looks, p)
		}
	}
	if maxRepeats > minRepeats {
		looks = append(looks, maxRepeats)
	}
	return looks
}

// AutoDesign is repeats: auto between min and max launches per trial.
func AutoDesign(minRepeats, maxRepeats int) Design {
	d := Design{Auto: true, MinRepeats: minRepeats, MaxRepeats: maxRepeats, Looks: Looks(minRepeats, maxRepeats),
		Alpha: Alpha, Interleave: true, MaxRelaunches: DefaultMaxRelaunches}
	d.LookAlpha = Alpha / float64(len(d.Looks)+1) // the looks and the report's final analysis
	return d
}

// FixedDesign is a fixed number of launches per trial.
func FixedDesign(repeats int, interleave bool) Design {
	return Design{Repeats: repeats, Alpha: Alpha, LookAlpha: Alpha, Interleave: interleave,
		MaxRelaunches: DefaultMaxRelaunches}
}

// DesignOf is the design a run recorded; runs made before it was recorded
// had a fixed number of repeats.
func DesignOf(m *store.Manifest) Design {
	if m.Measurement != nil && m.Measurement.LookAlpha > 0 {
		return Design(*m.Measurement)
	}
	il, _ := m.Workload["interleave"].(bool)
	return FixedDesign(int(Number(m.Workload["repeats"])), il)
}

// Number reads a number from a manifest map: float64 once read back from
// JSON, an int or int64 when the manifest was built in memory; 0 otherwise.
func Number(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return 0
}

// Level is what every interval and verdict of the run is decided at.
func (d Design) Level(threshold float64) Level {
	return Level{Confidence: 1 - d.LookAlpha, Threshold: threshold}
}

// SelectionLevel is the level of a comparison picked as the best of k (the
// headline): Bonferroni over the k comparisons it was picked from, so that
// picking the luckiest trial does not inflate its chance of a verdict.
func (d Design) SelectionLevel(threshold float64, k int) Level {
	return Level{Confidence: 1 - d.LookAlpha/float64(max(1, k)), Threshold: threshold}
}

// Record is the design as manifest.json stores it.
func (d Design) Record() *store.Measurement {
	m := store.Measurement(d)
	return &m
}

// IsLook reports whether comparisons are decided after round r (1-based).
func (d Design) IsLook(r int) bool {
	for _, l := range d.Looks {
		if l == r {
			return true
		}
	}
	return false
}
