package provenance

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
)

// Real NCCL lines, from logs posted in NVIDIA/nccl#1538 (P2P/CUMEM),
// NVIDIA/nccl#952 (P2P/IPC/read, NET/Socket), NVIDIA/nccl#1817
// (SHM/direct/direct), NVIDIA/nccl#1189 (NET/IB/GDRDMA) and
// Mellanox/nv_peer_memory#56 (NET/IB : Using).
const (
	p2pLog = `job-worker-0:5666:5808 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM
job-worker-0:5666:5808 [3] NCCL INFO Channel 08/0 : 3[3] -> 4[4] via P2P/CUMEM
host:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read
`
	shmLog = `sh9-machine:3884652:3884740 [7] NCCL INFO Channel 01 : 7[7] -> 2[2] via SHM/direct/direct
sh9-machine:3884652:3884744 [3] NCCL INFO Channel 00 : 3[3] -> 7[7] via SHM/direct/direct
`
	netLog = `master_node:24570:24907 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>
nccl-test:179:179 [0] NCCL INFO Using network IB
H20-GPU-06:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
H20-GPU-06:4015540:4015653 [1] NCCL INFO Channel 01/0 : 3[1] -> 1[1] [send] via NET/IB/2/GDRDMA
H20-GPU-06:4015540:4015653 [1] NCCL INFO Channel 00/0 : 3[1] -> 2[0] via P2P/CUMEM
ubuntu:9621:9692 [7] NCCL INFO Channel 14/0 : 15[7] -> 0[0] [send] via NET/Socket/0
10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA
`
)

func parseTransport(t *testing.T, log string) *store.NCCLTransport {
	t.Helper()
	tr, err := ParseNCCLTransport(strings.NewReader(log))
	require.NoError(t, err)
	return tr
}

func TestParseNCCLTransport(t *testing.T) {
	p2p := parseTransport(t, p2pLog)
	assert.Equal(t, map[string]int{"P2P/CUMEM": 2, "P2P/IPC": 1}, p2p.Connections)
	assert.Zero(t, p2p.GDR)

	shm := parseTransport(t, shmLog)
	assert.Equal(t, map[string]int{"SHM": 2}, shm.Connections)

	net := parseTransport(t, netLog)
	assert.Equal(t, map[string]int{"NET/IB": 3, "P2P/CUMEM": 1, "NET/Socket": 1}, net.Connections)
	assert.Equal(t, 3, net.GDR)
	assert.Equal(t, "IB", net.Network)
	assert.Equal(t, "NET/IB 3, NET/Socket 1, P2P/CUMEM 1, GDR 3, network IB", TransportSummary(net))

	assert.Nil(t, parseTransport(t, "host:1:1 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}\n"),
		"no transport lines: nothing recorded")
	assert.Nil(t, ReadNCCLTransport("/nonexistent/rank.log"))
}

func TestTransportKind(t *testing.T) {
	for via, want := range map[string]string{"P2P/CUMEM": "P2P/CUMEM", "P2P/IPC/read": "P2P/IPC", "P2P/direct": "P2P/direct",
		"SHM/direct/direct": "SHM", "NET/IB/0/GDRDMA": "NET/IB", "NET/Socket/0": "NET/Socket", "COLLNET": "COLLNET"} {
		got, _ := TransportKind(via)
		assert.Equal(t, want, got, via)
	}
	_, gdr := TransportKind("NET/IB/0/GDRDMA")
	assert.True(t, gdr)
	_, gdr = TransportKind("NET/IB/0")
	assert.False(t, gdr)
	assert.True(t, IntraNode("SHM"))
	assert.True(t, IntraNode("P2P/CUMEM"))
	assert.False(t, IntraNode("NET/IB"))
}

// TestTransportTaint: SHM between ranks of an NVLink host taints the launch
// with the reason; P2P does not, nor SHM on a host without NVLink (PCIe-only
// hosts may use SHM by design), nor a launch without transport lines.
func TestTransportTaint(t *testing.T) {
	p2p, shm, net := parseTransport(t, p2pLog), parseTransport(t, shmLog), parseTransport(t, netLog)
	assert.Empty(t, TransportTaint([]*store.NCCLTransport{p2p, net}, true))
	why := TransportTaint([]*store.NCCLTransport{p2p, shm}, true)
	assert.Contains(t, why, "NCCL connected 2 of 5 intra-node channels through host memory (SHM), not P2P")
	assert.Contains(t, why, "per-task GPU binding")
	assert.Empty(t, TransportTaint([]*store.NCCLTransport{shm}, false))
	assert.Empty(t, TransportTaint([]*store.NCCLTransport{nil, nil}, true))
}

func TestHasNVLink(t *testing.T) {
	h100 := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t0-51\t0\t\tN/A\nGPU1\tNV18\t X \t0-51\t0\t\tN/A\n\nLegend:\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
	pcie := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-15\t0\nGPU1\tPHB\t X \t0-15\t0\n\nLegend:\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
	assert.True(t, HasNVLink(h100))
	assert.False(t, HasNVLink(pcie))
	assert.False(t, HasNVLink(""))
}
