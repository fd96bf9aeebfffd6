package predict

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// Topology is a named machine the NCCL model runs on: what NCCL's topology
// search would find there (channels, bandwidth per channel) and the
// published points it must reproduce. One JSON file per topology in
// predict/topologies/, each with its sources.
type Topology struct {
	Name              string      `json:"name"`
	Description       string      `json:"description"`
	GPU               string      `json:"gpu"`
	ComputeCapability int         `json:"compute_capability"` // 90 = Hopper
	Nodes             int         `json:"nodes"`
	GPUsPerNode       int         `json:"gpus_per_node"`
	Intra             string      `json:"intra"`     // nvlink | pci: NCCL's intra-node hardware latency row
	Protocols         []string    `json:"protocols"` // enabled protocols; empty: LL, LL128, Simple
	Ring              Graph       `json:"ring"`
	Tree              Graph       `json:"tree"`
	LatencyInterUS    float64     `json:"latency_inter_us"` // NCCL graph latencyInter
	NetOverheadUS     float64     `json:"net_overhead_us"`  // NCCL getNetOverhead (multi-node rings)
	NVLS              bool        `json:"nvls"`             // must be false: the model has no NVLS
	Sources           []string    `json:"sources"`
	Derivation        string      `json:"derivation"` // how channels and bandwidths were obtained
	Published         []Published `json:"published"`
}

// Graph is one NCCL graph (ring or tree) as the topology search leaves it.
type Graph struct {
	Channels int     `json:"channels"`
	BWIntra  float64 `json:"bw_intra_gbs"` // per channel
	BWInter  float64 `json:"bw_inter_gbs"` // per channel
}

// Published is a measured figure the topology's model is checked against.
type Published struct {
	Op        string  `json:"op"`
	Ranks     int     `json:"ranks"`
	Bytes     int64   `json:"bytes"`
	BusBW     float64 `json:"busbw_gbs"`
	Algo      string  `json:"algo,omitempty"` // the algorithm the measurement forced, if any
	Tolerance float64 `json:"tolerance"`      // relative; 0: tabled only, not asserted (docs/predict.md says why)
	Source    string  `json:"source"`
	Note      string  `json:"note,omitempty"`
}

//go:embed topologies/*.json
var topologyFiles embed.FS

// MaxRanks is the topology's GPU count.
func (t *Topology) MaxRanks() int { return t.Nodes * t.GPUsPerNode }

// NodesFor is how many nodes ranks GPUs span, filled node by node.
func (t *Topology) NodesFor(ranks int) int { return max(1, (ranks+t.GPUsPerNode-1)/t.GPUsPerNode) }

func (t *Topology) protoEnabled(p string) bool {
	return len(t.Protocols) == 0 || slices.ContainsFunc(t.Protocols, func(q string) bool { return strings.EqualFold(p, q) })
}

// Topologies lists the built-in topology names.
func Topologies() []string {
	ents, _ := fs.ReadDir(topologyFiles, "topologies")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

// LoadTopology reads a built-in topology by name, or a JSON file when name
// ends in .json.
func LoadTopology(name string) (*Topology, error) {
	var data []byte
	var err error
	where := name
	if strings.HasSuffix(name, ".json") {
		data, err = os.ReadFile(name)
	} else {
		where = path.Join("topologies", name+".json")
		data, err = topologyFiles.ReadFile(where)
		if err != nil {
			return nil, fmt.Errorf("--topology %q: no such topology; built in: %s, or a .json file", name, strings.Join(Topologies(), ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--topology: %w", err)
	}
	return parseTopology(data, where)
}

func parseTopology(data []byte, where string) (*Topology, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Topology
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	bad := func(field, why string) error { return fmt.Errorf("%s: field %s %s", where, field, why) }
	switch {
	case t.Name == "":
		return nil, bad("name", "is empty")
	case t.Nodes < 1:
		return nil, bad("nodes", "must be at least 1")
	case t.GPUsPerNode < 1:
		return nil, bad("gpus_per_node", "must be at least 1")
	case t.Intra != "nvlink" && t.Intra != "pci":
		return nil, bad("intra", fmt.Sprintf("must be nvlink or pci, got %q", t.Intra))
	case t.Ring.Channels < 1 || t.Ring.BWIntra <= 0:
		return nil, bad("ring", "needs channels ≥ 1 and bw_intra_gbs > 0")
	case t.Nodes > 1 && t.Ring.BWInter <= 0:
		return nil, bad("ring.bw_inter_gbs", "must be > 0 on more than one node")
	case t.NVLS:
		return nil, bad("nvls", "is true: the model has no NVLS (the GPU provider runs with NVLink multicast off)")
	case len(t.Sources) == 0:
		return nil, bad("sources", "is empty: every topology names where its numbers come from")
	case t.ComputeCapability < 70:
		return nil, bad("compute_capability", "must be 70 (Volta) or more")
	}
	for _, p := range t.Protocols {
		if !slices.Contains(protocols, p) {
			return nil, bad("protocols", fmt.Sprintf("has %q; NCCL's are LL, LL128, Simple", p))
		}
	}
	for i, p := range t.Published {
		if p.Ranks < 2 || p.Ranks > t.MaxRanks() || p.Bytes <= 0 || p.BusBW <= 0 || p.Source == "" ||
			(p.Op != AllReduce && p.Op != AllGather) {
			return nil, bad(fmt.Sprintf("published[%d]", i), "needs op all_reduce|all_gather, 2 ≤ ranks ≤ the topology's GPUs, bytes, busbw_gbs and source")
		}
	}
	return &t, nil
}
