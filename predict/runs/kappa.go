package runs

import (
	"fmt"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/predict"
	"github.com/casestudy/casestudy/store"
)

// Loaded reports whether a run is a κ calibration launch: its measured steps
// ran with the load beside the backward pass (interfere_gbps > 0).
func Loaded(run *store.Run) bool {
	return anyStep(run, func(s engine.StepMetrics) bool { return s.InterfereGBps > 0 })
}

// anyStep reports whether any step of any rank of any launch of run has f.
func anyStep(run *store.Run, f func(engine.StepMetrics) bool) bool {
	for _, t := range run.Trials {
		for _, rp := range t.Repeats {
			for _, r := range rp.Ranks {
				for _, s := range r.Steps {
					if f(s) {
						return true
					}
				}
			}
		}
	}
	return false
}

// Kappa is the κ calibration from one-rank runs without the load (clean) and
// calibration runs with it (loaded): per trial of the calibration, its
// loaded backward times against the same trial's clean ones (rank 0's
// measured steps of ok launches); several trials: the one with the most
// loaded steps.
func Kappa(clean, loaded []*store.Run) (predict.Calibration, error) {
	backward := func(rs []*store.Run, withLoad bool) (map[string][]float64, map[string][]float64) {
		bw, gb := map[string][]float64{}, map[string][]float64{}
		for _, run := range rs {
			for _, t := range run.Trials {
				for _, rp := range t.Repeats {
					if rp.Outcome != store.OK || len(rp.Ranks) == 0 {
						continue
					}
					for _, s := range rp.Ranks[0].Steps {
						if (s.InterfereGBps > 0) != withLoad || s.BackwardMS <= 0 {
							continue
						}
						k := Key(t.Knobs)
						bw[k] = append(bw[k], s.BackwardMS)
						gb[k] = append(gb[k], s.InterfereGBps)
					}
				}
			}
		}
		return bw, gb
	}
	if n := timeouts(loaded); n > 0 {
		return predict.Calibration{}, fmt.Errorf("κ calibration void: the load outlived the backward pass %d time(s) and "+
			"stopped at its deadline, so something in the backward waited for the whole device (a device-wide "+
			"synchronisation); the loaded backward times measure that wait, not the load", n)
	}
	cleanBW, _ := backward(clean, false)
	loadedBW, gbps := backward(loaded, true)
	best := ""
	for k, v := range loadedBW {
		if len(cleanBW[k]) > 0 && (best == "" || len(v) > len(loadedBW[best]) || (len(v) == len(loadedBW[best]) && k < best)) {
			best = k
		}
	}
	if best == "" {
		return predict.Calibration{}, fmt.Errorf("no trial measured both with the κ calibration's load and without it " +
			"(casestudy run STUDY --predict N --kappa auto runs the calibration launch)")
	}
	return predict.Calibrate(best, cleanBW[best], loadedBW[best], gbps[best])
}

// timeouts is the interfere_timeouts of the calibration runs: each rank's
// largest (a running count within its launch), summed over ranks and launches.
func timeouts(rs []*store.Run) int64 {
	var n int64
	for _, run := range rs {
		for _, t := range run.Trials {
			for _, rp := range t.Repeats {
				for _, r := range rp.Ranks {
					var m int64
					for _, s := range r.Steps {
						m = max(m, s.InterfereTimeouts)
					}
					n += m
				}
			}
		}
	}
	return n
}
