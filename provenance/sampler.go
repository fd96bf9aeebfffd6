package provenance

import (
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/casestudy/casestudy/store"
)

// ThrottleMask is the set of NVML clock event reasons that mean the GPU was
// slowed by power or heat (not idle or application clocks).
const ThrottleMask = nvml.ClocksEventReasonSwPowerCap | nvml.ClocksThrottleReasonHwSlowdown |
	nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown |
	nvml.ClocksThrottleReasonHwPowerBrakeSlowdown

// Sampler reads SM clock, power, temperature and clock event reasons of some
// GPUs about once per interval while a trial runs.
type Sampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples []store.GPUSample
}

// StartSampler samples the GPUs whose NVML index or UUID is in devices
// (CUDA_VISIBLE_DEVICES entries); an empty list samples none. Without NVML it
// returns a sampler that records nothing.
func StartSampler(devices []string, interval time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	if len(devices) == 0 {
		close(s.done)
		return s
	}
	nvmlMu.Lock()
	ret := nvml.Init()
	nvmlMu.Unlock()
	if ret != nvml.SUCCESS {
		close(s.done)
		return s
	}
	type dev struct {
		index int
		d     nvml.Device
	}
	want := map[string]bool{}
	for _, d := range devices {
		want[d] = true
	}
	var devs []dev
	if n, ret := nvml.DeviceGetCount(); ret == nvml.SUCCESS {
		for i := 0; i < n; i++ {
			d, ret := nvml.DeviceGetHandleByIndex(i)
			if ret != nvml.SUCCESS {
				continue
			}
			uuid, _ := d.GetUUID()
			if want[strconv.Itoa(i)] || want[uuid] {
				devs = append(devs, dev{i, d})
			}
		}
	}
	start := time.Now()
	go func() {
		defer close(s.done)
		defer func() {
			nvmlMu.Lock()
			nvml.Shutdown()
			nvmlMu.Unlock()
		}()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			for _, d := range devs {
				sm := store.GPUSample{T: time.Since(start).Seconds(), GPU: d.index}
				sm.SMClock, _ = d.d.GetClockInfo(nvml.CLOCK_SM)
				if mw, ret := d.d.GetPowerUsage(); ret == nvml.SUCCESS {
					sm.PowerW = float64(mw) / 1000
				}
				sm.TempC, _ = d.d.GetTemperature(nvml.TEMPERATURE_GPU)
				if r, ret := d.d.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
					sm.Throttles = r
				} else if r, ret := d.d.GetCurrentClocksThrottleReasons(); ret == nvml.SUCCESS {
					sm.Throttles = r
				}
				s.samples = append(s.samples, sm)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the samples and whether any of them shows
// power or thermal throttling.
func (s *Sampler) Stop() ([]store.GPUSample, bool) {
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	return s.samples, Throttled(s.samples)
}

// Throttled reports whether a sample shows power or thermal throttling.
func Throttled(samples []store.GPUSample) bool {
	for _, sm := range samples {
		if sm.Throttles&ThrottleMask != 0 {
			return true
		}
	}
	return false
}
