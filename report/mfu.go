package report

import (
	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// MFUPeak is the one peak every trial's MFU is measured against: the dense
// bf16 tensor-core peak of the run's GPU. Measured against its own
// precision's peak (the engine's mfu), an fp32 trial six times slower than a
// bf16 one would show the higher MFU; against one peak, MFU ranks like
// achieved TFLOP/s.
type MFUPeak struct {
	Device string  `json:"device"`
	TFLOPS float64 `json:"tflops"` // per GPU
	Basis  string  `json:"basis"`
}

// MFUBasis names the peak in reports.
const MFUBasis = "dense bf16 tensor-core peak"

// mfuPeak finds the run's GPU (from the engine's description of a rank, else
// the host's first GPU when the engine knew a peak) and its bf16 peak; nil
// for CPU runs and GPUs the engine's table does not list.
func mfuPeak(run *store.Run) *MFUPeak {
	name := ""
	gpuRun := false
	for i := range run.Trials {
		rec := &run.Trials[i]
		if rec.Summary != nil && rec.Summary.MFU > 0 {
			gpuRun = true
		}
		for _, rep := range rec.Repeats {
			for _, rk := range rep.Ranks {
				if name == "" && rk.Info != nil && rk.Info.Device != "cpu" && rk.Info.DeviceName != "" {
					name = rk.Info.DeviceName
				}
			}
		}
	}
	if name == "" && gpuRun && len(run.Manifest.Host.GPUs) > 0 {
		name = run.Manifest.Host.GPUs[0].Name
	}
	peak := engine.DenseBF16PeakTFLOPS(name)
	if peak == 0 {
		return nil
	}
	return &MFUPeak{Device: name, TFLOPS: peak, Basis: MFUBasis}
}

// setMFU fills each trial's MFU against the common peak.
func setMFU(s *Summary) {
	if s.MFUPeak == nil {
		return
	}
	for i := range s.Trials {
		if t := &s.Trials[i]; t.TFLOPS > 0 {
			t.MFUBF16 = t.TFLOPS / s.MFUPeak.TFLOPS
		}
	}
}
