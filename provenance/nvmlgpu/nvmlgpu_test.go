package nvmlgpu

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/provenance"
)

// The pure-Go reason bits of package provenance are NVML's.
func TestReasonBitsAreNVMLs(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		ours, nvml uint64
	}{
		{"gpu idle", provenance.ReasonGPUIdle, nvml.ClocksEventReasonGpuIdle},
		{"application clocks", provenance.ReasonAppClocks, nvml.ClocksEventReasonApplicationsClocksSetting},
		{"sw power cap", provenance.ReasonSWPowerCap, nvml.ClocksEventReasonSwPowerCap},
		{"hw slowdown", provenance.ReasonHWSlowdown, nvml.ClocksThrottleReasonHwSlowdown},
		{"sync boost", provenance.ReasonSyncBoost, nvml.ClocksEventReasonSyncBoost},
		{"sw thermal", provenance.ReasonSWThermal, nvml.ClocksEventReasonSwThermalSlowdown},
		{"hw thermal", provenance.ReasonHWThermal, nvml.ClocksThrottleReasonHwThermalSlowdown},
		{"hw power brake", provenance.ReasonHWPowerBrake, nvml.ClocksThrottleReasonHwPowerBrakeSlowdown},
		{"display clock", provenance.ReasonDisplayClock, nvml.ClocksEventReasonDisplayClockSetting},
	} {
		assert.Equal(t, tc.nvml, tc.ours, tc.desc)
	}
	assert.Equal(t, []uint32{74, 269, 270, 271}, counterFields, "the field ids the issue names")
}

func TestFieldUint(t *testing.T) {
	v := nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)}
	binary.LittleEndian.PutUint64(v.Value[:], 123456789012)
	x, ok := fieldUint(v)
	assert.True(t, ok)
	assert.Equal(t, uint64(123456789012), x)

	v = nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_UNSIGNED_INT)}
	binary.LittleEndian.PutUint32(v.Value[:], 77)
	x, ok = fieldUint(v)
	assert.True(t, ok)
	assert.Equal(t, uint64(77), x)

	v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
	_, ok = fieldUint(v)
	assert.False(t, ok, "a field NVML could not read is no counter")

	v = nvml.FieldValue{ValueType: uint32(nvml.VALUE_TYPE_DOUBLE)}
	_, ok = fieldUint(v)
	assert.False(t, ok)
}

// Without a driver (this CPU machine) the source has no GPUs and says why;
// with one it lists them.
func TestOpen(t *testing.T) {
	s := Open()
	defer s.Close()
	info, err := s.Info()
	if err != nil {
		assert.Empty(t, info.GPUs)
		assert.Empty(t, s.Devices([]string{"0"}))
		return
	}
	for _, g := range info.GPUs {
		assert.NotEmpty(t, g.UUID)
	}
	s.Close() // twice is fine
}

// TestGPUCounters runs on the GPU machine (CASESTUDY_GPU_TESTS=1, from the
// nvmlgpu.test binary `make gpu-tests` builds): the driver reads GPU 0's
// clock, its reasons and the cumulative clock-event counters (field values
// 74, 269, 270, 271), which never go backwards.
func TestGPUCounters(t *testing.T) {
	if os.Getenv("CASESTUDY_GPU_TESTS") != "1" {
		t.Skip("GPU test: set CASESTUDY_GPU_TESTS=1 on a machine with an NVIDIA GPU (scripts/gpu-check.sh)")
	}
	s := Open()
	defer s.Close()
	info, err := s.Info()
	require.NoError(t, err)
	require.NotEmpty(t, info.GPUs)
	devs := s.Devices([]string{"0", info.GPUs[0].UUID})
	require.Len(t, devs, 1, "index and UUID name the same GPU")
	d := devs[0]
	assert.Positive(t, d.MaxSMClock())
	assert.Positive(t, d.Sample().SMClock)
	a, ok := d.Counters()
	require.True(t, ok, "this driver has the clock-event counters")
	time.Sleep(200 * time.Millisecond)
	b, ok := d.Counters()
	require.True(t, ok)
	assert.True(t, b.At.After(a.At), "NVML's read times advance")
	assert.GreaterOrEqual(t, b.SWPowerCapNS, a.SWPowerCapNS)
	assert.GreaterOrEqual(t, b.SWThermalNS, a.SWThermalNS)
	assert.GreaterOrEqual(t, b.HWThermalNS, a.HWThermalNS)
	assert.GreaterOrEqual(t, b.HWPowerBrakeNS, a.HWPowerBrakeNS)
	t.Logf("GPU 0 %s: counters power cap %d ns, sw thermal %d, hw thermal %d, power brake %d",
		info.GPUs[0].Name, b.SWPowerCapNS, b.SWThermalNS, b.HWThermalNS, b.HWPowerBrakeNS)
}
