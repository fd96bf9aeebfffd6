package measure

import (
	"fmt"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Launches are a trial's replicates: one value per clean launch (a separate
// process), in launch order. Steps are never replicates: they are averaged
// inside their launch (LaunchValue).
type Launches struct {
	Values      []float64  `json:"values"`        // the metric, one per clean launch
	SamplesPerS []float64  `json:"samples_per_s"` // the same launches' samples/s
	Repeats     []int      `json:"repeats"`       // the repeat index of each value
	Excluded    []Excluded `json:"excluded,omitempty"`
}

// Excluded is a launch left out of the statistics, and why. A launch is never
// left out for its value: only for a recorded fault (tainted, no measurement).
type Excluded struct {
	Repeat int    `json:"repeat"`
	Reason string `json:"reason"`
}

// N is the number of clean launches.
func (l Launches) N() int { return len(l.Values) }

// TrialLaunches picks a trial's clean launches: ok repeats that are not
// tainted (store.RepeatRecord.Tainted) and measured the metric.
func TrialLaunches(t *store.TrialRecord, m stats.Metric) Launches {
	var l Launches
	for i := range t.Repeats {
		r := &t.Repeats[i]
		if r.Outcome != store.OK {
			continue
		}
		if r.Tainted != "" {
			l.Excluded = append(l.Excluded, Excluded{Repeat: r.Repeat, Reason: "tainted: " + r.Tainted})
			continue
		}
		v, ok := LaunchValue(m, r)
		if !ok {
			l.Excluded = append(l.Excluded, Excluded{Repeat: r.Repeat, Reason: fmt.Sprintf("no %s measured", m.Name)})
			continue
		}
		sps := r.SamplesPerS
		if sps == 0 {
			sps, _ = Throughput(r.Ranks)
		}
		l.Values = append(l.Values, v)
		l.SamplesPerS = append(l.SamplesPerS, sps)
		l.Repeats = append(l.Repeats, r.Repeat)
	}
	return l
}

// CleanLaunches counts a trial's ok, untainted launches (what the scheduler
// counts towards its repeats).
func CleanLaunches(reps []store.RepeatRecord) int {
	n := 0
	for i := range reps {
		if reps[i].Outcome == store.OK && reps[i].Tainted == "" {
			n++
		}
	}
	return n
}
