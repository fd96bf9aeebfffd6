package predict

import (
	"fmt"
	"math"
)

// Calibration is the κ calibration's evidence (docs/predict.md): the one-rank
// run's backward pass with and without a load beside it that streams memory
// as a concurrent collective would (engine: CASESTUDY_INTERFERE, a copy
// kernel on C multiprocessors of a GPU, or C memory-streaming threads on
// CPU ranks). κ is their ratio: the load ran through the whole backward, so
// it is the backward's pace beside a collective, and the simulator slows the
// backward by it only while a collective runs (Options.Kappa). A stretch
// calibration's κ (ShadowRanks > 0) is the whole backward's beside its own
// collectives (Options.KappaWhole).
type Calibration struct {
	Kappa            float64 `json:"kappa"`              // max(1, Ratio): the simulator's κ
	Ratio            float64 `json:"ratio"`              // loaded / clean backward, as measured
	Trial            string  `json:"trial"`              // the trial it ran (its knob values)
	BackwardMS       float64 `json:"backward_ms"`        // median without the load
	LoadedBackwardMS float64 `json:"loaded_backward_ms"` // median with it
	LoadGBps         float64 `json:"load_gbps"`          // the traffic the load reached (median)
	Steps            int     `json:"steps"`              // loaded steps measured
	// ShadowRanks: the stretch calibration (CASESTUDY_INTERFERE=gloo:N): the
	// trial's own buckets as Gloo all-reduces on a group of N ranks beside its
	// backward, every other step of the same launches (CalibrateShadow); 0:
	// the memory-streaming load.
	ShadowRanks int `json:"shadow_ranks,omitempty"`
	Launches    int `json:"launches,omitempty"` // the stretch calibration's launches
	// Buckets: the stretch calibration's collectives, each bucket size's
	// median time in the loaded steps (Calibrated).
	Buckets []CalibratedBucket `json:"buckets,omitempty"`
}

// ShadowStep is one measured step of a stretch calibration launch, in the
// launch's order: its backward, and whether its buckets went to the group
// (loaded, with that traffic) or to the world of one (clean).
type ShadowStep struct {
	BackwardMS float64
	Loaded     bool
	GBps       float64
	Buckets    []Bucket // its collectives (op, bytes, ms)
}

// CalibrateShadow is one trial's stretch calibration from launches whose
// steps alternate between clean (its buckets on the world of one) and loaded
// (its buckets on a group of ranks whose other members only communicate).
// Each loaded step is set against the clean steps beside it in its launch
// (the mean of the one before and the one after, or the one there is), so
// that a change of the host's load that lasts longer than a step cancels;
// Ratio is the median of those ratios over every launch, κ = max(1, Ratio).
// BackwardMS and LoadedBackwardMS are the medians of all clean and loaded
// steps, for the record; Steps counts the loaded steps with a neighbour.
func CalibrateShadow(trial string, ranks int, launches [][]ShadowStep) (Calibration, error) {
	var ratios, clean, loaded, gbps []float64
	var buckets [][]Bucket
	used := 0
	for i, l := range launches {
		for k, s := range l {
			if s.BackwardMS <= 0 {
				return Calibration{}, fmt.Errorf("stretch calibration of %s: launch %d step %d: backward %g ms, must be positive", trial, i+1, k+1, s.BackwardMS)
			}
			if !s.Loaded {
				clean = append(clean, s.BackwardMS)
				continue
			}
			loaded, gbps, buckets = append(loaded, s.BackwardMS), append(gbps, s.GBps), append(buckets, s.Buckets)
			var sum float64
			n := 0
			for _, j := range []int{k - 1, k + 1} {
				if j >= 0 && j < len(l) && !l[j].Loaded {
					sum, n = sum+l[j].BackwardMS, n+1
				}
			}
			if n > 0 {
				ratios = append(ratios, s.BackwardMS/(sum/float64(n)))
			}
		}
		if len(l) > 0 {
			used++
		}
	}
	if len(ratios) == 0 {
		return Calibration{}, fmt.Errorf("stretch calibration of %s: no loaded step beside a clean one in %d launches (%d clean, %d loaded steps)", trial, len(launches), len(clean), len(loaded))
	}
	g := Median(gbps)
	if g <= 0 {
		return Calibration{}, fmt.Errorf("stretch calibration of %s: no collective ran on the group in its loaded steps", trial)
	}
	r := Median(ratios)
	return Calibration{Kappa: math.Max(1, r), Ratio: r, Trial: trial, BackwardMS: Median(clean),
		LoadedBackwardMS: Median(loaded), LoadGBps: g, Steps: len(ratios), ShadowRanks: ranks, Launches: used,
		Buckets: calibratedBuckets(buckets)}, nil
}

// Calibrate is the Calibration of one trial from its backward times without
// and with the load, and the load's traffic per loaded step.
func Calibrate(trial string, clean, loaded, gbps []float64) (Calibration, error) {
	if len(clean) == 0 || len(loaded) == 0 {
		return Calibration{}, fmt.Errorf("κ calibration of %s: %d steps without the load and %d with it: need both", trial, len(clean), len(loaded))
	}
	c, l := Median(clean), Median(loaded)
	if c <= 0 || l <= 0 {
		return Calibration{}, fmt.Errorf("κ calibration of %s: backward times must be positive (%g, %g ms)", trial, c, l)
	}
	g := Median(gbps)
	if g <= 0 {
		return Calibration{}, fmt.Errorf("κ calibration of %s: the load streamed nothing beside the backward pass", trial)
	}
	return Calibration{Kappa: math.Max(1, l/c), Ratio: l / c, Trial: trial, BackwardMS: c, LoadedBackwardMS: l,
		LoadGBps: g, Steps: len(loaded)}, nil
}
