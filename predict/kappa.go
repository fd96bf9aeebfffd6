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
