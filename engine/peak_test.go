package engine

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestDensePeaksMatchEngine: the Go table is the engine's (device.cpp), row by row.
func TestDensePeaksMatchEngine(t *testing.T) {
	src, err := os.ReadFile("native/src/device.cpp")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`\{"([^"]+)",\s*([0-9.]+),\s*[0-9.]+,\s*[0-9.]+\}`).FindAllStringSubmatch(string(src), -1)
	if len(rows) != len(densePeaks) {
		t.Fatalf("device.cpp has %d peak rows, engine/peak.go %d: keep them in step", len(rows), len(densePeaks))
	}
	for i, r := range rows {
		half, _ := strconv.ParseFloat(r[2], 64)
		if densePeaks[i].match != r[1] || densePeaks[i].bf16 != half {
			t.Errorf("row %d: device.cpp {%s %v}, peak.go {%s %v}", i, r[1], half, densePeaks[i].match, densePeaks[i].bf16)
		}
	}
	for name, want := range map[string]float64{"NVIDIA H200": 989.4, "NVIDIA H100 PCIe": 756.4, "NVIDIA H100 80GB HBM3": 989.4, "cpu": 0} {
		if got := DenseBF16PeakTFLOPS(name); got != want {
			t.Errorf("DenseBF16PeakTFLOPS(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestCuDNNVersion(t *testing.T) {
	for raw, want := range map[string]string{"91900": "9.19.0", "90100": "9.1.0", "8902": "8.9.2", "8600": "8.6.0", "9.1.0": "9.1.0", "": ""} {
		if got := CuDNNVersion(raw); got != want {
			t.Errorf("CuDNNVersion(%q) = %q, want %q", raw, got, want)
		}
	}
	for raw, want := range map[string]string{"91900": "9.19", "91901": "9.19", "8902": "8.9", "9.1.0": "9.1", "x": "x", "": ""} {
		if got := CuDNNMinor(raw); got != want {
			t.Errorf("CuDNNMinor(%q) = %q, want %q", raw, got, want)
		}
	}
}
