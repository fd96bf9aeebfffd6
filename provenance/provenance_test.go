package provenance

import (
	"path/filepath"
	"testing"

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
	h := ReadHost(nil) // no NVML: the host without GPUs, not an error
	assert.NotEmpty(t, h.Hostname)
	assert.NotEmpty(t, h.CPU)
	assert.Positive(t, h.CPUs)
	assert.Positive(t, h.MemBytes)
	assert.Empty(t, h.GPUs)
	assert.Empty(t, h.Driver)

	h = ReadHost(&fakeGPUs{info: GPUInfo{Driver: "580.1", CUDADriver: "13.0", GPUs: []store.GPU{{Name: "H200", UUID: "GPU-1"}}}})
	assert.Equal(t, "580.1", h.Driver)
	assert.Equal(t, "13.0", h.CUDADriver)
	assert.Len(t, h.GPUs, 1)
}

func TestFreeBytesOfMissingFolder(t *testing.T) {
	n, err := FreeBytes(filepath.Join(t.TempDir(), "not", "yet"))
	assert.NoError(t, err)
	assert.Positive(t, n)
}
