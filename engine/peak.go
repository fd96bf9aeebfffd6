package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// densePeaks are the dense (no sparsity) bf16/fp16 tensor-core peaks in
// TFLOP/s of the devices the engine knows, more specific names first. They
// are the "half" column of table_peak_tflops in native/src/device.cpp (a test
// checks that the two agree); docs/engine.md lists them.
var densePeaks = []struct {
	match string
	bf16  float64
}{
	{"H200", 989.4},
	{"H100 PCIe", 756.4},
	{"H100 NVL", 835.5},
	{"H100", 989.4},
	{"A100", 312.0},
}

// DenseBF16PeakTFLOPS is a device's dense bf16 tensor-core peak (TFLOP/s per
// GPU), the one reference every trial's MFU can be measured against whatever
// its precision; 0 when the device is not in the table (CPUs, other GPUs).
func DenseBF16PeakTFLOPS(deviceName string) float64 {
	for _, p := range densePeaks {
		if strings.Contains(deviceName, p.match) {
			return p.bf16
		}
	}
	return 0
}

// CuDNNVersion writes the integer cuDNN reports (cudnnGetVersion: 91900,
// 8902) in its usual dotted form (9.19.0, 8.9.2). Anything else is returned
// unchanged.
func CuDNNVersion(raw string) string {
	n, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || n <= 0 {
		return raw
	}
	if n >= 90000 { // cuDNN 9: major*10000 + minor*100 + patch
		return fmt.Sprintf("%d.%d.%d", n/10000, n%10000/100, n%100)
	}
	return fmt.Sprintf("%d.%d.%d", n/1000, n%1000/100, n%100) // cuDNN <= 8: major*1000 + minor*100 + patch
}

// CuDNNMinor is CuDNNVersion without the patch level ("91900": "9.19"): two
// copies of cuDNN a patch apart are the same release for what runs (a newer
// nvidia-cudnn wheel is how torch's users update it); anything CuDNNVersion
// does not read is returned unchanged.
func CuDNNMinor(raw string) string {
	s := CuDNNVersion(raw)
	if strings.Count(s, ".") != 2 {
		return s
	}
	return s[:strings.LastIndex(s, ".")]
}

// CuDNNCopy judges the cuDNN a process loaded (its cudnnGetVersion, loaded,
// and the loaded files by name, libraries: cs_info's or cs_build_info's)
// against the one torch was built with (built): path is the loaded
// libcudnn.so's ("?" when not among libraries), and ok is false only where
// both versions are known and their major or minor differ (a patch level
// apart is the same release: a newer nvidia-cudnn wheel is how torch's users
// update it). The doctor and the GPU test share it; the engine says the same
// on stderr (trainer.cpp note_libraries).
func CuDNNCopy(built, loaded string, libraries map[string]string) (path string, ok bool) {
	path = "?"
	for name, p := range libraries {
		if strings.HasPrefix(name, "libcudnn.so") {
			path = p
		}
	}
	return path, built == "" || loaded == "" || CuDNNMinor(built) == CuDNNMinor(loaded)
}
