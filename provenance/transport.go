package provenance

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// NCCL names the transport of every channel connection it makes at init
// (NCCL_DEBUG=INFO, subsystem INIT), on the rank that makes it:
//
//	node:5666:5808 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM
//	node:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read
//	node:3884652:3884740 [7] NCCL INFO Channel 01 : 7[7] -> 2[2] via SHM/direct/direct
//	node:4015539:4015652 [0] NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
//	node:9621:9692 [7] NCCL INFO Channel 14/0 : 15[7] -> 0[0] [send] via NET/Socket/0
//
// and, with subsystem NET, the network it chose ("NCCL INFO Using network IB").
// P2P (NVLink or PCIe peer-to-peer) and SHM (through host memory) connect
// ranks of one node, NET ranks of different nodes.
var (
	channelLine = regexp.MustCompile(`NCCL INFO Channel \d+(?:/\d+)? : \d+\[[0-9a-fA-Fx]+\] -> \d+\[[0-9a-fA-Fx]+\](?: \[(?:send|receive)\])? via (\S+)`)
	networkLine = regexp.MustCompile(`NCCL INFO Using network (\S+)`)
)

// ParseNCCLTransport counts a rank log's channel connections by transport;
// nil when the log has none (NCCL did not print INIT lines, or one rank).
func ParseNCCLTransport(r io.Reader) (*store.NCCLTransport, error) {
	t := &store.NCCLTransport{Connections: map[string]int{}}
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "NCCL INFO") {
			continue
		}
		if m := channelLine.FindStringSubmatch(line); m != nil {
			kind, gdr := TransportKind(m[1])
			t.Connections[kind]++
			if gdr {
				t.GDR++
			}
			n++
			continue
		}
		if m := networkLine.FindStringSubmatch(line); m != nil {
			t.Network = m[1]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n == 0 && t.Network == "" {
		return nil, nil
	}
	return t, nil
}

// ReadNCCLTransport parses the transport lines of one rank's log; nil when
// the file is missing or has none.
func ReadNCCLTransport(path string) *store.NCCLTransport {
	return readParsed(path, ParseNCCLTransport)
}

// readParsed parses the file at path; the zero value when it cannot be read
// or parsed.
func readParsed[T any](path string, parse func(io.Reader) (T, error)) T {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero
	}
	defer f.Close()
	t, err := parse(f)
	if err != nil {
		return zero
	}
	return t
}

// TransportKind is the transport of a connection as NCCL names it after
// "via": P2P/<mechanism> (CUMEM, IPC, direct), SHM, NET/<network> (IB,
// Socket, a plugin's name); gdr when the network connection uses GPUDirect
// RDMA.
func TransportKind(via string) (kind string, gdr bool) {
	parts := strings.Split(via, "/")
	switch {
	case parts[0] == "SHM":
		return "SHM", false
	case (parts[0] == "P2P" || parts[0] == "NET") && len(parts) > 1:
		return parts[0] + "/" + parts[1], parts[0] == "NET" && strings.Contains(via, "GDRDMA")
	}
	return parts[0], false
}

// IntraNode reports whether a transport kind connects ranks of one node.
func IntraNode(kind string) bool { return kind == "SHM" || strings.HasPrefix(kind, "P2P/") }

// TransportTaint says why a launch's measurement does not stand for the
// machine: on a host whose GPUs share NVLink, some of its intra-node channel
// connections went through host memory (SHM) instead of peer-to-peer, the
// silent fallback of ranks that cannot see each other's GPUs (per-task
// device cgroups, NVIDIA/nccl#1066) or of P2P switched off. "" when every
// intra-node connection is P2P, or without NVLink or transport lines.
func TransportTaint(ranks []*store.NCCLTransport, nvlinkHost bool) string {
	if !nvlinkHost {
		return ""
	}
	shm, intra := 0, 0
	for _, t := range ranks {
		if t == nil {
			continue
		}
		for k, n := range t.Connections {
			if IntraNode(k) {
				intra += n
			}
			if k == "SHM" {
				shm += n
			}
		}
	}
	if shm == 0 {
		return ""
	}
	return fmt.Sprintf("NCCL connected %d of %d intra-node channels through host memory (SHM), not P2P, on a host whose GPUs share NVLink: "+
		"the ranks could not reach each other's GPUs (per-task GPU binding or device cgroups, NCCL_P2P_DISABLE, NCCL_P2P_LEVEL)", shm, intra)
}

// TransportSummary is one line for people: "NET/IB 16, P2P/CUMEM 48, GDR 16, network IB".
func TransportSummary(t *store.NCCLTransport) string {
	if t == nil {
		return ""
	}
	kinds := make([]string, 0, len(t.Connections))
	for k := range t.Connections {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, t.Connections[k]))
	}
	if t.GDR > 0 {
		parts = append(parts, fmt.Sprintf("GDR %d", t.GDR))
	}
	if t.Network != "" {
		parts = append(parts, "network "+t.Network)
	}
	return strings.Join(parts, ", ")
}

var nvlinkCell = regexp.MustCompile(`\bNV\d+\b`)

// HasNVLink reports whether an `nvidia-smi topo -m` matrix shows NVLink
// between some pair of GPUs (a cell NV1, NV12, NV18 ...).
func HasNVLink(topo string) bool {
	for _, l := range strings.Split(topo, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && strings.HasPrefix(f[0], "GPU") && nvlinkCell.MatchString(strings.Join(f[1:], " ")) {
			return true
		}
	}
	return false
}
