package checklist

import (
	"fmt"

	"github.com/casestudy/casestudy/knobs"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/store"
)

// Transport rules: which transport NCCL's channels used (ranks[].nccl_transport).

var transportRules = []*Rule{
	{
		ID: "nccl-transport-fallback", Title: "NCCL channels not peer-to-peer on an NVLink host", Chapter: 4, Severity: Error,
		Rationale: "On a host whose GPUs share NVLink, NCCL connects ranks of one node peer-to-peer (P2P over NVLink). " +
			"When a rank cannot see its peers' GPUs (a scheduler that binds one GPU per task inside device cgroups, " +
			"containers, NCCL_P2P_DISABLE) NCCL falls back to host memory (SHM) without an error (NVIDIA/nccl#1066): " +
			"every bandwidth then measures the fallback, and the bucket and benchmark bandwidths are low together. " +
			"casestudy reads the transport of every channel from NCCL's INIT lines and leaves such launches out of the statistics.",
		Needs: []string{"NCCL channel lines (ranks[].nccl_transport)", "topology matrix (nvidia-smi topo -m)"},
		check: checkTransportFallback,
	},
}

func checkTransportFallback(c *evalContext) verdict {
	var seen, fallback, trials []string
	for _, t := range c.run.all {
		if t.Knobs["nccl.p2p_disable"] == "true" || !knobs.Unforced(t.Knobs["nccl.p2p_level"]) {
			continue // P2P off on purpose
		}
		for _, rp := range t.rec.Repeats {
			var ts []*store.NCCLTransport
			for _, rk := range rp.Ranks {
				if rk.NCCLTransport != nil {
					ts = append(ts, rk.NCCLTransport)
				}
			}
			if len(ts) == 0 {
				continue
			}
			seen = append(seen, t.ID)
			if why := provenance.TransportTaint(ts, true); why != "" {
				fallback = append(fallback, fmt.Sprintf("%s launch %d: %s", t.ID, rp.Repeat, transportLine(ts)))
				trials = append(trials, t.ID)
			}
		}
	}
	if len(seen) == 0 {
		return na("no launch recorded NCCL's channel transports (one rank, CPU ranks, or NCCL_DEBUG_SUBSYS without INIT)")
	}
	m, why := c.run.topo()
	if m == nil {
		return na("%s", why)
	}
	if !m.hasNVLink() {
		return na("the host's GPUs share no NVLink: SHM between them can be NCCL's right choice")
	}
	if len(fallback) == 0 {
		return pass("every intra-node NCCL channel of %d launch(es) was peer-to-peer", len(seen))
	}
	return verdict{
		Status:   Finding,
		Message:  fmt.Sprintf("%d launch(es) connected ranks of one node through host memory (SHM) on an NVLink host", len(fallback)),
		Evidence: fallback,
		Trials:   dedupe(trials),
		Recommendation: "make every GPU of a node visible to each of its ranks (no per-task GPU binding; casestudy's Slurm steps " +
			"use --gpus-per-node), and check NCCL_P2P_DISABLE and NCCL_P2P_LEVEL in the environment (manifest inherited_env)",
	}
}

// transportLine sums the connections of a launch's ranks by transport.
func transportLine(ts []*store.NCCLTransport) string {
	sum := &store.NCCLTransport{Connections: map[string]int{}}
	for _, t := range ts {
		for k, n := range t.Connections {
			sum.Connections[k] += n
		}
		sum.GDR += t.GDR
	}
	return provenance.TransportSummary(sum)
}
