package report

import (
	"math"

	meas "github.com/casestudy/casestudy/measure"
	gpuprov "github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// LaunchDetail is one launch of a trial as recorded: its value, rank 0's
// step times (warm-up, then the measured window) and the GPU's SM clock and
// power over the launch, with the window and the share of it the GPU spent
// power-capped. Every launch is listed, those left out of the statistics
// too (with why).
type LaunchDetail struct {
	Repeat  int           `json:"repeat"`
	Outcome store.Outcome `json:"outcome"`
	// Value is the launch's objective value (0: none); Excluded says why
	// it is left out of the statistics ("" when it counts).
	Value    float64 `json:"value,omitempty"`
	Excluded string  `json:"excluded,omitempty"`
	// WarmupStepMS and StepMS are rank 0's step times; StepT the seconds
	// since the launch started at which each step (warm-up first) ended,
	// on the GPU samples' clock (nil when the window is not recorded).
	WarmupStepMS []float64 `json:"warmup_step_ms,omitempty"`
	StepMS       []float64 `json:"step_ms,omitempty"`
	StepT        []float64 `json:"step_t,omitempty"`
	// WindowStart and WindowEnd bound the measured window in seconds since
	// the launch started (0, 0 when not recorded).
	WindowStart float64     `json:"window_start_s,omitempty"`
	WindowEnd   float64     `json:"window_end_s,omitempty"`
	GPU         []GPUSample `json:"gpu,omitempty"` // GPU 0's samples (the first GPU of the launch)
	// PowerCapped is the share of the window the GPU spent at its power
	// cap; SMClockMean its mean SM clock over the window (MHz).
	PowerCapped float64 `json:"power_capped"`
	SMClockMean float64 `json:"sm_mhz_mean,omitempty"`
	// Drift is the last third of the measured steps against the first
	// (measure.Unsteady): +0.04 = 4% slower at the end.
	Drift float64 `json:"drift"`
}

// GPUSample is one NVML reading of a launch.
type GPUSample struct {
	T           float64 `json:"t"` // seconds since the launch started
	SMClockMHz  uint32  `json:"sm_mhz"`
	PowerW      float64 `json:"power_w"`
	PowerCapped bool    `json:"power_capped,omitempty"` // the software power cap limited the clock
}

// launchDetails lists every launch of a trial.
func launchDetails(rec *store.TrialRecord, metric stats.Metric) []LaunchDetail {
	var out []LaunchDetail
	for i := range rec.Repeats {
		r := &rec.Repeats[i]
		d := LaunchDetail{Repeat: r.Repeat, Outcome: r.Outcome}
		if v, ok := meas.LaunchValue(metric, r); ok {
			d.Value = v
		}
		switch {
		case r.Outcome != store.OK:
			d.Excluded = "the launch did not finish: " + r.Error
		case r.Tainted != "":
			d.Excluded = "tainted: " + r.Tainted
		case d.Value == 0:
			d.Excluded = "no measurement"
		}
		if len(r.Ranks) > 0 {
			rk := &r.Ranks[0]
			d.WarmupStepMS = rk.WarmupStepMS
			for _, s := range rk.Steps {
				d.StepMS = append(d.StepMS, s.StepMS)
			}
		}
		if dr, _ := meas.Unsteady(r); !math.IsNaN(dr) {
			d.Drift = dr
		}
		gpu := -1
		for _, g := range r.GPUSamples {
			if gpu < 0 {
				gpu = g.GPU
			}
			if g.GPU == gpu {
				d.GPU = append(d.GPU, GPUSample{T: g.T, SMClockMHz: g.SMClock, PowerW: g.PowerW,
					PowerCapped: g.Throttles&gpuprov.ReasonSWPowerCap != 0})
			}
		}
		if th := r.Throttle; th != nil && r.Timeline != nil && !r.Timeline.Start.IsZero() && !th.WindowStart.IsZero() {
			d.WindowStart = th.WindowStart.Sub(r.Timeline.Start).Seconds()
			d.WindowEnd = th.WindowEnd.Sub(r.Timeline.Start).Seconds()
			for _, g := range th.GPUs {
				if g.GPU == gpu || gpu < 0 {
					d.PowerCapped, d.SMClockMean = g.PowerCap, g.SMClockMHz
					break
				}
			}
			d.StepT = stepTimes(d.WarmupStepMS, d.StepMS, d.WindowStart)
		}
		out = append(out, d)
	}
	return out
}

// stepTimes places each step's end on the launch clock: the measured steps
// one after the other from the window's start, the warm-up steps before it.
func stepTimes(warm, steps []float64, start float64) []float64 {
	out := make([]float64, 0, len(warm)+len(steps))
	t := start
	for i := len(warm) - 1; i >= 0; i-- {
		out = append(out, t)
		t -= warm[i] / 1000
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	t = start
	for _, ms := range steps {
		t += ms / 1000
		out = append(out, t)
	}
	return out
}

// DropLaunchDetail leaves out every trial's per-launch steps and GPU samples:
// a baseline file (casestudy baseline), committed next to its study, keeps
// the launch values compare needs, not the traces of every launch.
func (s *Summary) DropLaunchDetail() {
	for i := range s.Trials {
		s.Trials[i].LaunchDetail = nil
	}
}
