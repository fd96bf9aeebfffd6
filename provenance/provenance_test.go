package provenance

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/store"
)

func TestRelevantEnv(t *testing.T) {
	got := RelevantEnv([]string{"NCCL_ALGO=Ring", "PATH=/bin", "CUDA_VISIBLE_DEVICES=0,1", "OMP_NUM_THREADS=4",
		"CASESTUDY_ENGINE_LIB=/x.so", "HOME=/root", "MY_NCCL_ALGO=no"})
	assert.Equal(t, map[string]string{"NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": "0,1", "OMP_NUM_THREADS": "4",
		"CASESTUDY_ENGINE_LIB": "/x.so"}, got)
}

func TestReadHost(t *testing.T) {
	h := ReadHost()
	assert.NotEmpty(t, h.Hostname)
	assert.NotEmpty(t, h.CPU)
	assert.Positive(t, h.CPUs)
	assert.Positive(t, h.MemBytes)
	if _, err := ReadGPUs(); err != nil {
		// a CPU machine: NVML is absent and that is not an error for the host
		assert.Empty(t, h.GPUs)
		assert.Empty(t, h.Driver)
	} else {
		for _, g := range h.GPUs {
			assert.NotEmpty(t, g.UUID)
			assert.Positive(t, g.MemBytes)
		}
	}
}

func TestThrottled(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		reasons uint64
		want    bool
	}{
		{"idle", 1, false},
		{"application clocks", 2, false},
		{"power cap", 4, true},
		{"hw thermal", 64, true},
		{"idle and sw thermal", 1 | 32, true},
	} {
		assert.Equal(t, tc.want, Throttled([]store.GPUSample{{Throttles: 0}, {Throttles: tc.reasons}}), tc.desc)
	}
}

func TestSamplerWithoutDevices(t *testing.T) {
	s := StartSampler(nil, 10*time.Millisecond)
	samples, throttled := s.Stop()
	assert.Empty(t, samples)
	assert.False(t, throttled)
	_, _ = s.Stop() // twice is fine
	s = StartSampler([]string{"0"}, 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	samples, _ = s.Stop()
	if _, err := ReadGPUs(); err != nil {
		assert.Empty(t, samples, "no NVML, no samples")
	} else {
		assert.NotEmpty(t, samples)
	}
}

func TestFreeBytesOfMissingFolder(t *testing.T) {
	n, err := FreeBytes(filepath.Join(t.TempDir(), "not", "yet"))
	assert.NoError(t, err)
	assert.Positive(t, n)
}
