package checklist

import (
	"fmt"
	"math"
	"strings"
)

// Environment rules about links: topology and bus bandwidth.

var topoRules = []*Rule{
	{
		ID: "busbw-vs-link", Title: "Bus bandwidth far below the link's capability", Chapter: 15, Severity: Warning,
		Rationale: "Large all-reduces should approach the link's bandwidth (nccl-tests' busbw). Far less points " +
			"at a wrong path (PCIe or SYS instead of NVLink), disabled P2P, a forced algorithm/protocol or too few " +
			"channels. Link classes assumed per direction: NVLink 4 (H100/H200) 450 GB/s, NVLink 3 (A100) " +
			"300 GB/s, PCIe Gen5 x16 64 GB/s, Gen4 32 GB/s; set link_gbs to use another figure.",
		Needs: []string{"steps[].buckets (bytes, busbw)", "GPU model and NVLink count", "topology matrix"},
		Thresholds: []Threshold{
			{Name: "link_gbs", Default: 0, Unit: "GB/s", Doc: "per-direction link bandwidth to compare with; 0 = from the GPU model and topology"},
			{Name: "large_bucket_mb", Default: 16, Unit: "MiB", Doc: "buckets at least this large are judged"},
			{Name: "min_frac", Default: 0.3, Unit: "fraction", Doc: "busbw below this share of the link is far below"},
		},
		check: checkBusBW,
	},
	{
		ID: "topology", Title: "GPU pairs without NVLink", Chapter: 1, Severity: Warning,
		Rationale: "On a host with NVLink, ranks on GPUs connected only through PCIe (PIX, PXB, PHB) or across CPU " +
			"sockets (NODE, SYS) communicate at a fraction of NVLink's bandwidth, and a ring is as slow as its " +
			"slowest hop. Read from the captured `nvidia-smi topo -m`.",
		Needs: []string{"topology matrix (nvidia-smi topo -m)", "ranks' GPUs"},
		check: checkTopology,
	},
}

// topo parses the manifest's matrix (nil with the reason when unusable).
func (v *runView) topo() (*topoMatrix, string) {
	text := v.run.Manifest.Host.TopoMatrix
	if strings.TrimSpace(text) == "" {
		return nil, "the manifest has no `nvidia-smi topo -m` matrix (CPU run, or nvidia-smi was missing)"
	}
	m, err := parseTopo(text)
	if err != nil {
		return nil, "the topology matrix could not be read: " + err.Error()
	}
	return m, ""
}

// linkPairs splits the used GPU pairs into NVLink and other paths.
func linkPairs(m *topoMatrix, gpus []string) (nv, other [][2]string) {
	for i := range gpus {
		for j := i + 1; j < len(gpus); j++ {
			p := [2]string{gpus[i], gpus[j]}
			if isNVLink(m.Link(p[0], p[1])) {
				nv = append(nv, p)
			} else {
				other = append(other, p)
			}
		}
	}
	return nv, other
}

func checkTopology(c *evalContext) verdict {
	m, why := c.run.topo()
	if m == nil {
		return na("%s", why)
	}
	gpus := c.run.usedGPUs(m)
	if len(gpus) < 2 {
		return na("the run used fewer than two GPUs")
	}
	nv, other := linkPairs(m, gpus)
	hostNVLink := m.hasNVLink()
	for _, g := range c.run.run.Manifest.Host.GPUs {
		hostNVLink = hostNVLink || g.NVLinks > 0
	}
	if len(other) == 0 {
		return pass("all %d pairs of the %d GPUs used connect over NVLink (%s)", len(nv), len(gpus), m.Link(gpus[0], gpus[1]))
	}
	if hostNVLink {
		rec := "check NVLink health (nvidia-smi nvlink -s) and, on NVSwitch systems, the fabric manager"
		if g := m.nvlinkGroup(); len(g) >= len(gpus) {
			idx := make([]string, len(g[:len(gpus)]))
			for i, name := range g[:len(gpus)] {
				idx[i] = strings.TrimPrefix(name, "GPU")
			}
			rec = fmt.Sprintf("run the ranks on GPUs that all share NVLink (CUDA_VISIBLE_DEVICES=%s), or %s",
				strings.Join(idx, ","), rec)
		}
		return verdict{
			Status: Finding,
			Message: fmt.Sprintf("%d of %d GPU pairs used connect without NVLink although this host has NVLink: %s",
				len(other), len(nv)+len(other), strings.Join(limit(pairList(m, other), 4), ", ")),
			Evidence:       limit(pairList(m, other), 16),
			Recommendation: rec,
		}
	}
	var sys [][2]string
	for _, p := range other {
		if l := m.Link(p[0], p[1]); l == "SYS" || l == "SOC" {
			sys = append(sys, p)
		}
	}
	if len(sys) > 0 {
		return verdict{
			Status:   Finding,
			Severity: Info,
			Message: fmt.Sprintf("no NVLink on this host, and %d GPU pair(s) cross CPU sockets (SYS): %s",
				len(sys), strings.Join(limit(pairList(m, sys), 4), ", ")),
			Evidence:       limit(pairList(m, other), 16),
			Recommendation: "place communicating ranks on GPUs of one socket (NODE) or one PCIe switch (PIX/PXB); expect PCIe bandwidth (see busbw-vs-link)",
		}
	}
	return pass("no NVLink on this host; the %d GPUs used share PCIe paths without crossing sockets", len(gpus))
}

func checkBusBW(c *evalContext) verdict {
	if !c.run.onGPU() {
		return na("CPU run: Gloo over shared memory has no GPU link to compare with")
	}
	large := c.t("large_bucket_mb") * (1 << 20)
	var bestT *trial
	bestBW, bestBytes := 0.0, 0.0
	for _, t := range c.run.dataParallel() {
		for _, rp := range t.okRepeats() {
			for _, s := range rank0(rp) {
				for _, b := range s.Buckets {
					if float64(b.Bytes) >= large && b.BusBW() > bestBW { // without arrival skew where split
						bestT, bestBW, bestBytes = t, b.BusBW(), float64(b.Bytes)
					}
				}
			}
		}
	}
	if bestT == nil {
		return na("no all-reduce bucket of at least %s MiB with a bus bandwidth was measured", num(c.t("large_bucket_mb")))
	}
	nvlink := false
	if m, _ := c.run.topo(); m != nil {
		if gpus := c.run.usedGPUs(m); len(gpus) >= 2 {
			nv, other := linkPairs(m, gpus)
			nvlink = len(nv) > 0 && len(other) == 0
		}
	} else {
		for _, g := range c.run.run.Manifest.Host.GPUs {
			nvlink = nvlink || g.NVLinks > 0
		}
	}
	link, class := linkCapacity(c.run.run.Manifest.Host, nvlink)
	if v := c.t("link_gbs"); v > 0 {
		link, class = v, "the study's link_gbs"
	}
	if link == 0 {
		name := "unknown"
		if gs := c.run.run.Manifest.Host.GPUs; len(gs) > 0 {
			name = gs[0].Name
		}
		return na("no link bandwidth known for %s over %s: set checklist.thresholds.busbw-vs-link.link_gbs", name, class)
	}
	frac := bestBW / link
	msg := fmt.Sprintf("the best large all-reduce reached %s bus bandwidth (%s bucket, trial %s), %s of %s's ~%s per direction",
		gbs(bestBW), gib(bestBytes), bestT.ID, pct(frac), class, gbs(link))
	if frac >= c.t("min_frac") {
		return pass("%s", msg)
	}
	return verdict{
		Status:   Finding,
		Message:  msg,
		Evidence: []string{bucketLine(bestT), fmt.Sprintf("judged: buckets ≥ %s MiB, threshold %s of the link", num(c.t("large_bucket_mb")), pct(c.t("min_frac")))},
		Trials:   ids(bestT),
		Recommendation: "compare with nccl-tests all_reduce_perf on the same GPUs; check the topology rule, NCCL_P2P_DISABLE/NCCL_P2P_LEVEL, " +
			"forced nccl.algo/nccl.proto and nccl.min_channels; " + fmt.Sprintf("a %s link should give well above %s", class, gbs(math.Round(c.t("min_frac")*link))),
	}
}
