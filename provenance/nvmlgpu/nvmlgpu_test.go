package nvmlgpu

import (
	"encoding/binary"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"

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
