package stats

// Design is a run's launch schedule and statistical design. manifest.json
// records it as store.Measurement, which has the same fields: measure's
// DesignOf, DesignFromRecord and DesignRecord convert between the two (the
// conversion stops compiling if the fields part, and a test compares their
// JSON).
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
type Design struct {
	// Repeats is the fixed number of clean launches per trial; 0 with Auto.
	Repeats int `json:"repeats,omitempty"`
	// Auto: repeats: auto, a sequential design that launches until each
	// trial's comparison with the baseline is decided.
	Auto       bool  `json:"auto,omitempty"`
	MinRepeats int   `json:"min_repeats,omitempty"` // auto: launches every trial gets
	MaxRepeats int   `json:"max_repeats,omitempty"` // auto: launches no trial exceeds
	Looks      []int `json:"looks,omitempty"`       // auto: the rounds after which comparisons are decided
	// Alpha is the overall two-sided false-positive rate of one comparison;
	// LookAlpha the rate of each look (Alpha with a fixed number of repeats):
	// every interval of the run is at confidence 1-LookAlpha.
	Alpha     float64 `json:"alpha"`
	LookAlpha float64 `json:"look_alpha"`
	MaxTimeS  float64 `json:"max_time_s,omitempty"` // time budget for launches (0: none)
	// Interleave: launches run in rounds, one per trial, in a fresh random
	// order each round drawn from OrderSeed.
	Interleave bool   `json:"interleave"`
	OrderSeed  uint64 `json:"order_seed,omitempty"`
	// Preheat: one unmeasured launch warmed the GPU before the first measured one.
	Preheat bool `json:"preheat,omitempty"`
	// MaxRelaunches is how many extra launches a trial may get to replace
	// tainted ones.
	MaxRelaunches int `json:"max_relaunches,omitempty"`
}

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

// IsLook reports whether comparisons are decided after round r (1-based).
func (d Design) IsLook(r int) bool {
	for _, l := range d.Looks {
		if l == r {
			return true
		}
	}
	return false
}
