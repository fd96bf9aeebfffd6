package checklist

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/casestudy/casestudy/store"
)

// topoMatrix is `nvidia-smi topo -m` parsed: device names in column order and
// the connection between each pair (X, NV#, PIX, PXB, PHB, NODE, SYS).
type topoMatrix struct {
	Devices []string
	cell    map[[2]string]string
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// parseTopo reads the matrix part of `nvidia-smi topo -m`: the header row of
// device names (up to "CPU Affinity"), then one row per device.
func parseTopo(text string) (*topoMatrix, error) {
	m := &topoMatrix{cell: map[[2]string]string{}}
	lines := strings.Split(ansi.ReplaceAllString(text, ""), "\n")
	header := -1
	for i, l := range lines {
		f := strings.Fields(l)
		// The header names devices; a row's second cell is a link ("X" for self).
		if len(f) > 0 && strings.HasPrefix(f[0], "GPU") && (len(f) == 1 || !isLinkToken(f[1])) {
			header = i
			for _, tok := range f {
				if tok == "CPU" || tok == "NUMA" {
					break
				}
				m.Devices = append(m.Devices, tok)
			}
			break
		}
	}
	if header < 0 || len(m.Devices) == 0 {
		return nil, fmt.Errorf("no header row of device names (GPU0 ...)")
	}
	known := map[string]bool{}
	for _, d := range m.Devices {
		known[d] = true
	}
	rows := 0
	for _, l := range lines[header+1:] {
		f := strings.Fields(l)
		if len(f) == 0 || !known[f[0]] {
			continue
		}
		if len(f) < len(m.Devices)+1 {
			return nil, fmt.Errorf("row %s has %d cells, want %d", f[0], len(f)-1, len(m.Devices))
		}
		for j, d := range m.Devices {
			m.cell[[2]string{f[0], d}] = f[j+1]
		}
		rows++
	}
	if rows == 0 {
		return nil, fmt.Errorf("no device rows under the header")
	}
	return m, nil
}

// Link returns the connection between two devices ("" when unknown).
func (m *topoMatrix) Link(a, b string) string { return m.cell[[2]string{a, b}] }

// GPUs returns the GPU device names of the matrix.
func (m *topoMatrix) GPUs() []string {
	var out []string
	for _, d := range m.Devices {
		if strings.HasPrefix(d, "GPU") {
			out = append(out, d)
		}
	}
	return out
}

var linkToken = regexp.MustCompile(`^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$`)

func isLinkToken(s string) bool { return linkToken.MatchString(s) }

func isNVLink(link string) bool { return strings.HasPrefix(link, "NV") }

// hasNVLink reports whether any two GPUs of the matrix share NVLink.
func (m *topoMatrix) hasNVLink() bool {
	gs := m.GPUs()
	for i := range gs {
		for j := i + 1; j < len(gs); j++ {
			if isNVLink(m.Link(gs[i], gs[j])) {
				return true
			}
		}
	}
	return false
}

// nvlinkGroup returns the largest set of GPUs that all share NVLink (greedy).
func (m *topoMatrix) nvlinkGroup() []string {
	var best []string
	gs := m.GPUs()
	for _, start := range gs {
		group := []string{start}
		for _, g := range gs {
			if g == start {
				continue
			}
			all := true
			for _, h := range group {
				if !isNVLink(m.Link(g, h)) {
					all = false
					break
				}
			}
			if all {
				group = append(group, g)
			}
		}
		if len(group) > len(best) {
			best = group
		}
	}
	return best
}

// usedGPUs returns the matrix names (GPU<i>) of the GPUs the run's trials ran
// on: each rank's own GPU UUID (its cs_info) where the host's GPUs list it,
// else its CUDA_VISIBLE_DEVICES entry (an index, or a UUID); every GPU of the
// matrix when a rank's GPU cannot be placed (a UUID of another node). An
// index assumes CUDA numbers devices as nvidia-smi does (PCI bus order:
// CUDA_DEVICE_ORDER=PCI_BUS_ID, or identical GPUs); a UUID assumes nothing.
func (v *runView) usedGPUs(m *topoMatrix) []string {
	byUUID := map[string]int{}
	for _, g := range v.run.Manifest.Host.GPUs {
		if g.UUID != "" {
			byUUID[g.UUID] = g.Index
		}
	}
	seen := map[string]bool{}
	placed := true
	for _, t := range v.all {
		for _, rp := range t.rec.Repeats {
			for _, rk := range rp.Ranks {
				if i, ok := rankGPUIndex(rk, byUUID); ok {
					seen["GPU"+strconv.Itoa(i)] = true
				} else if rk.GPU != "" || (rk.Info != nil && rk.Info.GPUUUID != "") {
					placed = false
				}
			}
		}
	}
	if !placed || len(seen) == 0 {
		return m.GPUs()
	}
	var out []string
	for _, g := range m.GPUs() {
		if seen[g] {
			out = append(out, g)
		}
	}
	return out
}

// rankGPUIndex is the nvidia-smi index of the GPU a rank ran on: from the
// UUID it reported, else from its device entry (an index or a UUID).
func rankGPUIndex(rk store.RankRecord, byUUID map[string]int) (int, bool) {
	if rk.Info != nil && rk.Info.GPUUUID != "" {
		i, ok := byUUID[rk.Info.GPUUUID]
		return i, ok
	}
	e := strings.TrimSpace(rk.GPU)
	if e == "" {
		return 0, false
	}
	if i, ok := byUUID[e]; ok {
		return i, true
	}
	i, err := strconv.Atoi(e)
	return i, err == nil
}

// linkCapacity is the per-direction bandwidth class of the links between the
// run's GPUs, from the GPU model and whether they share NVLink. Assumptions:
// NVLink 5 (B200) 900 GB/s, NVLink 4 (H100/H200) 450 GB/s, H800/A800 200 GB/s,
// NVLink 3 (A100) 300 GB/s, NVLink 2 (V100) 150 GB/s; PCIe x16 Gen5 64 GB/s,
// Gen4 32 GB/s, Gen3 16 GB/s. 0 when the model is not in the table.
func linkCapacity(host store.Host, nvlink bool) (float64, string) {
	name := ""
	if len(host.GPUs) > 0 {
		name = strings.ToUpper(host.GPUs[0].Name)
	}
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(name, x) {
				return true
			}
		}
		return false
	}
	if nvlink {
		switch {
		case has("B200", "B100", "GB200", "B300"):
			return 900, "NVLink 5"
		case has("H800", "A800"):
			return 200, "NVLink (export-limited)"
		case has("H100", "H200", "GH200"):
			return 450, "NVLink 4"
		case has("A100"):
			return 300, "NVLink 3"
		case has("V100"):
			return 150, "NVLink 2"
		}
		return 0, "NVLink"
	}
	switch {
	case has("B200", "B100", "H100", "H200", "H800", "GH200"):
		return 64, "PCIe Gen5 x16"
	case has("A100", "A800", "A30", "A10", "L40", "L4"):
		return 32, "PCIe Gen4 x16"
	case has("V100", "T4", "P100"):
		return 16, "PCIe Gen3 x16"
	}
	return 0, "PCIe"
}

// pairList formats GPU pairs with their links: "GPU0–GPU4 SYS".
func pairList(m *topoMatrix, pairs [][2]string) []string {
	out := make([]string, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, fmt.Sprintf("%s–%s %s", p[0], p[1], m.Link(p[0], p[1])))
	}
	sort.Strings(out)
	return out
}
