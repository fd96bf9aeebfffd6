// Package provenance records where a run ran and what the machine did while
// it ran: the host, its GPUs (through the GPUs interface, which
// provenance/nvmlgpu implements with go-nvml; this package needs no cgo), the
// `nvidia-smi topo -m` matrix, the relevant environment, GPU samples and
// clock-event counters around each launch's measured window, and NCCL's
// tuning choices read from the ranks' logs.
package provenance

import (
	"errors"
	"time"

	"github.com/casestudy/casestudy/store"
)

// GPUs is the machine's GPUs as NVML sees them: static facts for the
// manifest and live readers for the sampler. provenance/nvmlgpu implements it
// with go-nvml (cgo, the driver's library loaded at run time); this package
// stays pure Go and its tests use a fake.
type GPUs interface {
	// Info reads the driver and every GPU. An error means no NVML: a CPU
	// machine, which callers treat as having no GPUs.
	Info() (GPUInfo, error)
	// Devices returns live readers of the GPUs named by CUDA_VISIBLE_DEVICES
	// entries (an index or a UUID); names NVML does not know are left out.
	Devices(names []string) []Device
}

// Device reads one GPU's live state. Its methods may be called from several
// goroutines (NVML is thread-safe).
type Device interface {
	Index() int
	MaxSMClock() uint32 // MHz
	// Sample reads the SM clock, power, temperature and current clock-event
	// reasons (T and GPU are the caller's).
	Sample() store.GPUSample
	// Counters reads NVML's cumulative clock-event counters; ok is false
	// where the driver or GPU has none.
	Counters() (c ClockEventCounters, ok bool)
}

// GPUInfo is what NVML says about the machine's GPUs.
type GPUInfo struct {
	Driver     string
	CUDADriver string // e.g. "12.8"
	GPUs       []store.GPU
}

// ClockEventCounters are NVML's cumulative nanoseconds spent in each
// clock-event reason since the driver loaded (field values
// NVML_FI_DEV_CLOCKS_EVENT_REASON_*), read at one time. Two readings around a
// window give the time throttled inside it exactly.
type ClockEventCounters struct {
	At             time.Time // when NVML read them
	SWPowerCapNS   uint64    // field 74
	SWThermalNS    uint64    // field 269
	HWThermalNS    uint64    // field 270
	HWPowerBrakeNS uint64    // field 271
}

// NVML clock-event reasons (nvmlClocksEventReason*, the bits of
// GetCurrentClocksEventReasons); provenance/nvmlgpu checks them against
// go-nvml's constants.
const (
	ReasonGPUIdle      uint64 = 0x1
	ReasonAppClocks    uint64 = 0x2
	ReasonSWPowerCap   uint64 = 0x4
	ReasonHWSlowdown   uint64 = 0x8
	ReasonSyncBoost    uint64 = 0x10
	ReasonSWThermal    uint64 = 0x20
	ReasonHWThermal    uint64 = 0x40
	ReasonHWPowerBrake uint64 = 0x80
	ReasonDisplayClock uint64 = 0x100 // display clock setting: not a slowdown of the compute clocks
)

// TaintMask is the reasons that make a measurement untrustworthy: thermal
// slowdown (software and hardware), hardware slowdown and the power brake.
// The software power cap (0x4) is left out: it is how an H200 runs at full
// load, and is reported as the clock deficit instead.
const TaintMask = ReasonHWSlowdown | ReasonSWThermal | ReasonHWThermal | ReasonHWPowerBrake

// ErrNoNVML is the error of NoGPUs.Info when no reason is given.
var ErrNoNVML = errors.New("NVML is not available")

// NoGPUs is a machine (or a build) without NVML: no GPU facts, nothing to sample.
type NoGPUs struct{ Err error }

func (n NoGPUs) Info() (GPUInfo, error) {
	if n.Err == nil {
		return GPUInfo{}, ErrNoNVML
	}
	return GPUInfo{}, n.Err
}

func (NoGPUs) Devices([]string) []Device { return nil }

// orNone is g, or NoGPUs when g is nil.
func orNone(g GPUs) GPUs {
	if g == nil {
		return NoGPUs{}
	}
	return g
}
