// Package provenance records where a run ran: the host, its GPUs through NVML
// (github.com/NVIDIA/go-nvml, which loads the driver's library at run time, so
// CPU machines simply report no GPUs), the `nvidia-smi topo -m` matrix, the
// relevant environment, and GPU clocks, power, temperature and throttling
// sampled while a trial runs.
package provenance

import (
	"fmt"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/casestudy/casestudy/store"
)

// nvmlMu guards Init/Shutdown pairs (NVML is reference counted, but a failed
// Init must not be paired with a Shutdown).
var nvmlMu sync.Mutex

// withNVML runs f between nvml.Init and nvml.Shutdown; without a driver it
// returns the Init error (ERROR_LIBRARY_NOT_FOUND on CPU machines).
func withNVML(f func() error) error {
	nvmlMu.Lock()
	ret := nvml.Init()
	nvmlMu.Unlock()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML: %s", nvml.ErrorString(ret))
	}
	defer func() {
		nvmlMu.Lock()
		nvml.Shutdown()
		nvmlMu.Unlock()
	}()
	return f()
}

// GPUInfo is what NVML says about the machine's GPUs.
type GPUInfo struct {
	Driver     string
	CUDADriver string // e.g. "12.8"
	GPUs       []store.GPU
}

// ReadGPUs reads every GPU through NVML. A machine without the NVIDIA driver
// returns an error and no GPUs; callers treat it as a CPU machine.
func ReadGPUs() (GPUInfo, error) {
	var info GPUInfo
	err := withNVML(func() error {
		if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
			info.Driver = v
		}
		if v, ret := nvml.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
			info.CUDADriver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
		}
		n, ret := nvml.DeviceGetCount()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("NVML device count: %s", nvml.ErrorString(ret))
		}
		devs := make([]nvml.Device, n)
		for i := range devs {
			d, ret := nvml.DeviceGetHandleByIndex(i)
			if ret != nvml.SUCCESS {
				return fmt.Errorf("NVML device %d: %s", i, nvml.ErrorString(ret))
			}
			devs[i] = d
		}
		for i, d := range devs {
			info.GPUs = append(info.GPUs, readGPU(i, d, devs))
		}
		return nil
	})
	return info, err
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
