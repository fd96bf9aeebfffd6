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
	libs := map[string]string{"libcudnn.so.9": "/usr/lib/libcudnn.so.9", "libnccl.so.2": "/w/libnccl.so.2"}
	for _, c := range []struct {
		built, loaded string
		ok            bool
	}{{"91900", "91900", true}, {"91900", "91901", true}, {"91900", "91400", false}, {"91900", "", true}, {"", "91400", true}} {
		path, ok := CuDNNCopy(c.built, c.loaded, libs)
		if path != "/usr/lib/libcudnn.so.9" || ok != c.ok {
			t.Errorf("CuDNNCopy(%q, %q) = %q, %v; want the libcudnn path, %v", c.built, c.loaded, path, ok, c.ok)
		}
	}
	if path, _ := CuDNNCopy("91900", "91900", map[string]string{"libnccl.so.2": "/w"}); path != "?" {
		t.Errorf("CuDNNCopy without a libcudnn: path %q, want ?", path)
	}
}
