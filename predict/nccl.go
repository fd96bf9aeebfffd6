package predict

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// The NCCL model: the formulas of NCCL's tuner (NVIDIA/nccl
// src/graph/tuning.cc, ncclTopoTuneModel and ncclTopoGetAlgoTime, at
// 5067397c), for all-reduce (Ring and Tree) and all-gather (Ring), each with
// the LL, LL128 and Simple protocols. NVLS is left out: the GPU provider runs
// with NVLink multicast off. The constants below are NCCL's defaults
// (ncclTunerConstantsDefaults); what depends on the machine (channels and
// bandwidth per channel from NCCL's topology search, links, nodes) comes from
// a Topology file.

// Protocols and algorithms, in NCCL's order.
var (
	protocols  = []string{"LL", "LL128", "Simple"}
	algorithms = []string{"Tree", "Ring"}
)

// baseLat[algo][proto], µs.
var baseLat = map[string][3]float64{"Tree": {6.8, 14.0, 8.4}, "Ring": {6.6, 14.0, 8.4}}

// hwLat[hw][algo][proto], µs per step.
var hwLat = map[string]map[string][3]float64{
	"nvlink": {"Tree": {0.6, 1.25, 4.0}, "Ring": {0.6, 1.9, 3.4}},
	"pci":    {"Tree": {1.0, 1.9, 4.0}, "Ring": {1.0, 2.5, 5.7}},
	"net":    {"Tree": {5.0, 8.5, 14}, "Ring": {2.7, 4.0, 14.0}},
}

// Per compute-capability generation (Volta, Ampere, Hopper, Blackwell) and
// nodes index (1, 2, more): NCCL's caps, GB/s.
var (
	llMaxBws             = [4][3]float64{{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}}
	perChMaxRingLL128Bws = [4][3]float64{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}}
	perChMaxTreeLL128Bws = [4][3]float64{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}
	perChMaxTreeBws      = [4][3]float64{{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}
)

// treeCorrectionFactor[proto][log2(bytes/64)], for all-reduce trees.
var treeCorrectionFactor = [3][24]float64{
	{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
	{1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
	{.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}

// NCCL is the NCCL cost model on one topology. Algo and Proto restrict the
// choice as NCCL_ALGO and NCCL_PROTO do ("" = NCCL's own pick).
type NCCL struct {
	Topo  *Topology
	Algo  string
	Proto string
}

// Name implements CostModel.
func (m NCCL) Name() string { return "NCCL tuning model on " + m.Topo.Name }

func (m NCCL) compIndex() int {
	switch c := m.Topo.ComputeCapability; {
	case c >= 100:
		return 3
	case c >= 90:
		return 2
	case c >= 80:
		return 1
	}
	return 0
}

// Estimate is the model's time for one algorithm and protocol.
type Estimate struct {
	Algo, Proto string
	LatUS       float64 // latency, µs
	BusBW       float64 // NCCL's busBw before the algorithm ratio, GB/s
	AlgBW       float64 // bandwidth bytes move at, GB/s (NCCL's bandwidths[][][])
	MS          float64
}

// Estimates is every algorithm x protocol NCCL would consider for op at this
// size and rank count, as ncclTopoTuneModel and ncclTopoGetAlgoTime compute them.
func (m NCCL) Estimates(op string, bytes int64, ranks int) ([]Estimate, error) {
	t := m.Topo
	if ranks < 2 {
		return nil, nil
	}
	nodes := t.NodesFor(ranks)
	ppn := float64(ranks) / float64(nodes)
	ci := m.compIndex()
	i2 := min(nodes-1, 2)
	var nsteps int
	switch op {
	case AllReduce:
		nsteps = 2 * (ranks - 1)
	case AllGather:
		nsteps = ranks - 1
	default:
		return nil, fmt.Errorf("NCCL model: unknown collective %q", op)
	}
	var out []Estimate
	for _, a := range algorithms {
		if op == AllGather && a != "Ring" {
			continue
		}
		g := t.Ring
		if a == "Tree" {
			g = t.Tree
		}
		if g.Channels == 0 {
			continue
		}
		intraHw := t.Intra
		for pi, p := range protocols {
			bw := g.BWInter
			if nodes <= 2 {
				bw = g.BWIntra
			}
			busBw := float64(g.Channels) * bw
			llMax := llMaxBws[ci][i2]
			if nodes > 1 {
				llMax = llMaxBws[0][i2] // multi-node: by CPU vendor; Intel's row
			}
			switch {
			case a == "Ring" && p == "LL":
				busBw = math.Min(llMax, busBw*.5)
			case a == "Ring" && p == "LL128":
				busBw = math.Min(busBw*0.92, float64(g.Channels)*perChMaxRingLL128Bws[ci][i2])
			}
			if a == "Tree" && op == AllReduce {
				busBw = math.Min(busBw*.92, float64(g.Channels)*perChMaxTreeBws[ci][i2])
			}
			if a == "Tree" && p == "LL" {
				busBw = math.Min(busBw/3.8, llMax)
			}
			if a == "Tree" && p == "LL128" {
				f := 120.0 / 128.0
				if nodes == 1 {
					f = 7.0 / 9.0
				}
				busBw = math.Min(busBw*f, float64(g.Channels)*perChMaxTreeLL128Bws[ci][i2])
			}
			if !t.protoEnabled(p) {
				continue
			}
			ratio := .5
			if a == "Ring" {
				ratio = float64(ranks) / float64(nsteps)
			}
			algBw := busBw * ratio
			lat := baseLat[a][pi]
			intraLat := hwLat[intraHw][a][pi]
			interLat := hwLat["net"][a][pi]
			if ppn == 1 {
				interLat = hwLat["net"]["Tree"][pi]
			}
			interLat += t.LatencyInterUS
			if p == "Simple" {
				interLat += t.LatencyInterUS
			}
			if a == "Ring" {
				if nodes > 1 {
					over := t.NetOverheadUS
					if p == "Simple" {
						over *= 3
					}
					intraLat = math.Max(intraLat, over)
				}
				inter := 0
				if nodes > 1 {
					inter = nsteps / (ranks - 1) * (nodes - 1)
				}
				lat += float64(nsteps-inter)*intraLat + float64(inter)*interLat
			} else {
				lat += 2 * (float64(ranks/nodes-1)*intraLat + float64(log2i(nodes))*interLat)
			}
			// ncclTopoGetAlgoTime
			logSize := log2i(int(bytes >> 6))
			if a == "Tree" && op == AllReduce && logSize >= 0 && logSize < 23 {
				algBw *= treeCorrectionFactor[pi][logSize]
			}
			if a == "Ring" && p == "Simple" && nodes > 1 && op == AllReduce &&
				float64(bytes)/float64(g.Channels*ranks) >= 64 {
				if t.ComputeCapability < 80 {
					lat *= 1.9
				} else {
					lat *= 1.4
				}
			}
			us := lat + float64(bytes)/(1000*algBw)
			out = append(out, Estimate{Algo: a, Proto: p, LatUS: lat, BusBW: busBw, AlgBW: algBw, MS: us / 1000})
		}
	}
	return out, nil
}

// log2i is NCCL's log2i: floor(log2(n)), -1 for n < 1.
func log2i(n int) int {
	if n < 1 {
		return -1
	}
	return bits.Len(uint(n)) - 1
}

// Time implements CostModel: the fastest of NCCL's estimates, within the
// model's algorithm and protocol restrictions.
func (m NCCL) Time(op string, bytes int64, ranks int) (float64, string, error) {
	if ranks <= 1 {
		return 0, "one rank", nil
	}
	if ranks > m.Topo.MaxRanks() {
		return 0, "", fmt.Errorf("topology %s has %d GPUs, not %d", m.Topo.Name, m.Topo.MaxRanks(), ranks)
	}
	est, err := m.Estimates(op, bytes, ranks)
	if err != nil {
		return 0, "", err
	}
	best := -1
	for i, e := range est {
		if m.Algo != "" && !strings.EqualFold(m.Algo, e.Algo) || m.Proto != "" && !strings.EqualFold(m.Proto, e.Proto) {
			continue
		}
		if best < 0 || e.MS < est[best].MS {
			best = i
		}
	}
	if best < 0 {
		return 0, "", fmt.Errorf("NCCL model on %s: no algorithm %q / protocol %q for %s", m.Topo.Name, m.Algo, m.Proto, op)
	}
	return est[best].MS, est[best].Algo + "/" + est[best].Proto, nil
}
