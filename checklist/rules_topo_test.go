package checklist

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Matrices as `nvidia-smi topo -m` prints them (header underlined with ANSI codes).
const (
	topoNVSwitch = "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n" +
		"GPU0\t X \tNV18\tNV18\tNV18\tSYS\t0-55,112-167\t0\t\tN/A\n" +
		"GPU1\tNV18\t X \tNV18\tNV18\tSYS\t0-55,112-167\t0\t\tN/A\n" +
		"GPU2\tNV18\tNV18\t X \tNV18\tSYS\t56-111,168-223\t1\t\tN/A\n" +
		"GPU3\tNV18\tNV18\tNV18\t X \tSYS\t56-111,168-223\t1\t\tN/A\n" +
		"NIC0\tSYS\tSYS\tSYS\tSYS\t X \t\t\t\t\n\n" +
		"Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n" +
		"NIC Legend:\n\n  NIC0: mlx5_0\n"
	// GPU2-GPU3 lost their NVLink to GPU0/GPU1 (pairs of bridged cards).
	topoBridged = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tNV4\tSYS\tSYS\t0-31\t0\n" +
		"GPU1\tNV4\t X \tSYS\tSYS\t0-31\t0\n" +
		"GPU2\tSYS\tSYS\t X \tNV4\t32-63\t1\n" +
		"GPU3\tSYS\tSYS\tNV4\t X \t32-63\t1\n"
	topoPCIe = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tSYS\t0-31\t0\n" +
		"GPU1\tSYS\t X \t32-63\t1\n"
	topoPCIeSwitch = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n" +
		"GPU0\t X \tPIX\t0-31\t0\n" +
		"GPU1\tPIX\t X \t0-31\t0\n"
)

func TestParseTopo(t *testing.T) {
	m, err := parseTopo(topoNVSwitch)
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU0", "GPU1", "GPU2", "GPU3", "NIC0"}, m.Devices)
	assert.Equal(t, "NV18", m.Link("GPU1", "GPU3"))
	assert.Equal(t, "SYS", m.Link("GPU2", "NIC0"))
	assert.Equal(t, []string{"GPU0", "GPU1", "GPU2", "GPU3"}, m.GPUs())

	m, err = parseTopo(topoBridged)
	require.NoError(t, err)
	assert.Len(t, m.nvlinkGroup(), 2)

	// Captured on an H200 machine (one GPU): underlined header, legend below.
	captured, err := os.ReadFile(filepath.Join("testdata", "topo-h200-1gpu.txt"))
	require.NoError(t, err)
	m, err = parseTopo(string(captured))
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU0"}, m.Devices)
	assert.Equal(t, "X", m.Link("GPU0", "GPU0"))
	res := evalOne(t, mkRun([]spec{{id: "a", thr: 1, stepMS: 1}}, onGPUs(1, "NVIDIA H200", 143771<<20, 0, string(captured))), "topology", Config{})
	assert.Equal(t, NotApplicable, res.Status)
	assert.Contains(t, res.Message, "fewer than two GPUs")

	for _, bad := range []string{"", "Legend:\n  X = Self\n", "\tGPU0\tGPU1\nGPU0\t X\n"} {
		_, err := parseTopo(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestTopology(t *testing.T) {
	four := []spec{{id: "a", ranks: 4, thr: 100, stepMS: 100}}
	two := []spec{{id: "a", ranks: 2, thr: 100, stepMS: 100}}
	runCases(t, "topology", []ruleCase{
		{name: "NVSwitch: all NVLink", status: Pass, run: mkRun(four, onGPUs(4, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)),
			contains: []string{"all 6 pairs", "NV18"}},
		{name: "SYS pairs on an NVLink host", status: Finding, severity: Warning,
			run:      mkRun(four, onGPUs(4, "NVIDIA A100-SXM4-40GB", 40<<30, 4, topoBridged)),
			contains: []string{"4 of 6 GPU pairs", "GPU0–GPU2 SYS", "nvidia-smi nvlink -s"}},
		{name: "two ranks on the NVLinked pair", status: Pass,
			run: mkRun(two, onGPUs(4, "NVIDIA A100-SXM4-40GB", 40<<30, 4, topoBridged))},
		{name: "PCIe only across sockets", status: Finding, severity: Info,
			run:      mkRun(two, onGPUs(2, "NVIDIA L40S", 48<<30, 0, topoPCIe)),
			contains: []string{"cross CPU sockets (SYS)"}},
		{name: "PCIe switch", status: Pass, run: mkRun(two, onGPUs(2, "NVIDIA L40S", 48<<30, 0, topoPCIeSwitch))},
		{name: "no matrix", status: NotApplicable, run: mkRun(two), contains: []string{"no `nvidia-smi topo -m` matrix"}},
		{name: "one GPU", status: NotApplicable,
			run: mkRun([]spec{{id: "a", thr: 1, stepMS: 1}}, onGPUs(4, "NVIDIA H100", 80<<30, 18, topoNVSwitch))},
	})
}

func TestBusBWVsLink(t *testing.T) {
	h100 := onGPUs(4, "NVIDIA H100 80GB HBM3", 80<<30, 18, topoNVSwitch)
	runCases(t, "busbw-vs-link", []ruleCase{
		{name: "far below NVLink", status: Finding,
			run:      mkRun([]spec{{id: "slow", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 40, 20, 5)}}, h100),
			contains: []string{"40.0 GB/s bus bandwidth", "8.89% of NVLink 4's ~450.0 GB/s"}, trials: []string{"slow"}},
		{name: "near NVLink", status: Pass,
			run: mkRun([]spec{{id: "ok", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 350, 20, 5)}}, h100)},
		{name: "PCIe host judged against PCIe", status: Pass,
			run:      mkRun([]spec{{id: "p", ranks: 2, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 40, 20, 5)}}, onGPUs(2, "NVIDIA H100 PCIe", 80<<30, 0, topoPCIeSwitch)),
			contains: []string{"PCIe Gen5 x16"}},
		{name: "study sets the link", status: Finding,
			run: mkRun([]spec{{id: "p", ranks: 2, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 40, 20, 5)}}, onGPUs(2, "NVIDIA H100 PCIe", 80<<30, 0, topoPCIeSwitch)),
			cfg: Config{Thresholds: map[string]map[string]float64{"busbw-vs-link": {"link_gbs": 200}}}},
		{name: "small buckets only", status: NotApplicable,
			run:      mkRun([]spec{{id: "s", ranks: 4, thr: 100, stepMS: 100, step: dpSteps(40, mib, 40, 20, 5)}}, h100),
			contains: []string{"at least 16 MiB"}},
		{name: "unknown GPU", status: NotApplicable,
			run:      mkRun([]spec{{id: "s", ranks: 2, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 40, 20, 5)}}, onGPUs(2, "Mystery GPU", 8<<30, 0, topoPCIeSwitch)),
			contains: []string{"link_gbs"}},
		{name: "cpu run", status: NotApplicable,
			run: mkRun([]spec{{id: "s", ranks: 2, thr: 100, stepMS: 100, step: dpSteps(4, 25*mib, 4, 20, 5)}})},
	})
}
