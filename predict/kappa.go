package predict

import (
	"fmt"
	"math"
)

// Calibration is the κ calibration's evidence (docs/predict.md): the one-rank
// run's backward pass with and without a load beside it that streams memory
// as a concurrent collective would (engine: CASESTUDY_INTERFERE, a copy
// kernel on C multiprocessors of a GPU, or C memory-streaming threads on
// CPU ranks). κ is their ratio; the simulator stretches the backward pass and
// the ready times by it when buckets overlap.
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
}

// CalibrateShadow is one trial's stretch calibration: launches whose steps
// alternate between clean (its buckets on the world of one) and loaded (its
// buckets on a group of ranks whose other members only communicate), so that
// both kinds of step share each launch's conditions. Per launch the ratio of
// the loaded steps' median backward to the clean ones'; Ratio is the median
// of those ratios over the launches (a launch at another load of the host
// moves both of its medians), κ = max(1, Ratio). BackwardMS and
// LoadedBackwardMS are the medians of every launch's steps, for the record.
func CalibrateShadow(trial string, ranks int, clean, loaded [][]float64, gbps []float64) (Calibration, error) {
	if len(clean) != len(loaded) || len(clean) == 0 {
		return Calibration{}, fmt.Errorf("stretch calibration of %s: %d launches with clean steps, %d with loaded ones: need the same, at least one", trial, len(clean), len(loaded))
	}
	var ratios, allClean, allLoaded []float64
	for i := range clean {
		if len(clean[i]) == 0 || len(loaded[i]) == 0 {
			return Calibration{}, fmt.Errorf("stretch calibration of %s: launch %d has %d clean and %d loaded steps: need both", trial, i+1, len(clean[i]), len(loaded[i]))
		}
		c, l := Median(clean[i]), Median(loaded[i])
		if c <= 0 || l <= 0 {
			return Calibration{}, fmt.Errorf("stretch calibration of %s: launch %d: backward times must be positive (%g, %g ms)", trial, i+1, c, l)
		}
		ratios = append(ratios, l/c)
		allClean, allLoaded = append(allClean, clean[i]...), append(allLoaded, loaded[i]...)
	}
	g := Median(gbps)
	if g <= 0 {
		return Calibration{}, fmt.Errorf("stretch calibration of %s: no collective ran on the group in its loaded steps", trial)
	}
	r := Median(ratios)
	return Calibration{Kappa: math.Max(1, r), Ratio: r, Trial: trial, BackwardMS: Median(allClean),
		LoadedBackwardMS: Median(allLoaded), LoadGBps: g, Steps: len(allLoaded), ShadowRanks: ranks, Launches: len(clean)}, nil
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
