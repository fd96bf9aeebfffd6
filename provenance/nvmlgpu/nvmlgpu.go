// Package nvmlgpu implements provenance.GPUs with NVIDIA's go-nvml, which
// loads the driver's libnvidia-ml at run time (cgo + dlopen): CPU machines
// simply have no GPUs. It is the only package besides engine/binding that
// needs cgo; commands wire it in.
package nvmlgpu

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// Source is NVML initialised once (Open) until Close.
type Source struct {
	err  error // why NVML is not there
	mu   sync.Mutex
	open bool
}

// Open initialises NVML. Without the driver the Source reports the error from
// Info and has no devices.
func Open() *Source {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return &Source{err: fmt.Errorf("NVML: %s", nvml.ErrorString(ret))}
	}
	return &Source{open: true}
}

// Close shuts NVML down (twice is fine).
func (s *Source) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		nvml.Shutdown()
		s.open = false
	}
}

// Info reads the driver and every GPU.
func (s *Source) Info() (provenance.GPUInfo, error) {
	var info provenance.GPUInfo
	if s.err != nil {
		return info, s.err
	}
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		info.Driver = v
	}
	if v, ret := nvml.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		info.CUDADriver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	devs, err := handles()
	if err != nil {
		return info, err
	}
	for i, d := range devs {
		info.GPUs = append(info.GPUs, readGPU(i, d, devs))
	}
	return info, nil
}

func handles() ([]nvml.Device, error) {
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML device count: %s", nvml.ErrorString(ret))
	}
	devs := make([]nvml.Device, n)
	for i := range devs {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML device %d: %s", i, nvml.ErrorString(ret))
		}
		devs[i] = d
	}
	return devs, nil
}

// ComputeCapability is the lowest CUDA compute capability of the node's GPUs
// as major*10+minor (90: Hopper); 0 without a GPU or a driver.
func (s *Source) ComputeCapability() int {
	if s.err != nil {
		return 0
	}
	devs, err := handles()
	if err != nil {
		return 0
	}
	low := 0
	for _, d := range devs {
		major, minor, ret := d.GetCudaComputeCapability()
		if ret != nvml.SUCCESS {
			return 0
		}
		if c := major*10 + minor; low == 0 || c < low {
			low = c
		}
	}
	return low
}

// Devices returns readers of the GPUs named by index or UUID.
func (s *Source) Devices(names []string) []provenance.Device {
	if s.err != nil || len(names) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	devs, err := handles()
	if err != nil {
		return nil
	}
	var out []provenance.Device
	for i, d := range devs {
		uuid, _ := d.GetUUID()
		if want[strconv.Itoa(i)] || want[uuid] {
			g := &device{index: i, d: d}
			g.maxSM, _ = d.GetMaxClockInfo(nvml.CLOCK_SM)
			out = append(out, g)
		}
	}
	return out
}

type device struct {
	index int
	d     nvml.Device
	maxSM uint32
}

func (g *device) Index() int         { return g.index }
func (g *device) MaxSMClock() uint32 { return g.maxSM }

func (g *device) Sample() store.GPUSample {
	var sm store.GPUSample
	sm.SMClock, _ = g.d.GetClockInfo(nvml.CLOCK_SM)
	if mw, ret := g.d.GetPowerUsage(); ret == nvml.SUCCESS {
		sm.PowerW = float64(mw) / 1000
	}
	sm.TempC, _ = g.d.GetTemperature(nvml.TEMPERATURE_GPU)
	if r, ret := g.d.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
		sm.Throttles = r
	} else if r, ret := g.d.GetCurrentClocksThrottleReasons(); ret == nvml.SUCCESS {
		sm.Throttles = r
	}
	return sm
}

// counterFields are the cumulative clock-event counters, in the order of
// provenance.ClockEventCounters.
var counterFields = []uint32{
	nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
	nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
	nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
	nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN,
}

func (g *device) Counters() (provenance.ClockEventCounters, bool) {
	vals := make([]nvml.FieldValue, len(counterFields))
	for i, f := range counterFields {
		vals[i].FieldId = f
	}
	if ret := g.d.GetFieldValues(vals); ret != nvml.SUCCESS {
		return provenance.ClockEventCounters{}, false
	}
	ns := make([]uint64, len(vals))
	var at int64
	for i, v := range vals {
		x, ok := fieldUint(v)
		if !ok {
			return provenance.ClockEventCounters{}, false
		}
		ns[i] = x
		at = max(at, v.Timestamp)
	}
	c := provenance.ClockEventCounters{At: time.Now(), SWPowerCapNS: ns[0], SWThermalNS: ns[1], HWThermalNS: ns[2], HWPowerBrakeNS: ns[3]}
	if at > 0 { // NVML's own read time, µs since the epoch
		c.At = time.UnixMicro(at)
	}
	return c, true
}

// fieldUint is an unsigned field value; false when NVML could not read it.
func fieldUint(v nvml.FieldValue) (uint64, bool) {
	if nvml.Return(v.NvmlReturn) != nvml.SUCCESS {
		return 0, false
	}
	le := func(n int) uint64 {
		var x uint64
		for i := n - 1; i >= 0; i-- {
			x = x<<8 | uint64(v.Value[i])
		}
		return x
	}
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return le(8), true
	case nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT:
		return le(4), true
	}
	return 0, false
}

func readGPU(i int, d nvml.Device, all []nvml.Device) store.GPU {
	g := store.GPU{Index: i}
	g.Name, _ = d.GetName()
	g.UUID, _ = d.GetUUID()
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemBytes = m.Total
	}
	g.SMClockMax, _ = d.GetMaxClockInfo(nvml.CLOCK_SM)
	g.MemClockMax, _ = d.GetMaxClockInfo(nvml.CLOCK_MEM)
	if mw, ret := d.GetPowerManagementLimit(); ret == nvml.SUCCESS {
		g.PowerLimitW = float64(mw) / 1000
	}
	if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBus = cString(pci.BusId[:])
	}
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			break
		}
		if st == nvml.FEATURE_ENABLED {
			g.NVLinks++
		}
	}
	if len(all) > 1 {
		for j, peer := range all {
			if j == i {
				g.P2P = append(g.P2P, "self")
				continue
			}
			st, ret := d.GetP2PStatus(peer, nvml.P2P_CAPS_INDEX_READ)
			switch {
			case ret != nvml.SUCCESS:
				g.P2P = append(g.P2P, "unknown")
			case st == nvml.P2P_STATUS_OK:
				g.P2P = append(g.P2P, "OK")
			default:
				g.P2P = append(g.P2P, fmt.Sprintf("not supported (%d)", st))
			}
		}
	}
	return g
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
