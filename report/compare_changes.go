package report

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ProvChange is one fact of the setup that differs between the two runs of a
// comparison: a regression next to a new torch, driver or GPU is read
// differently from one on the same machine.
type ProvChange struct {
	What string `json:"what"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// changedBetween lists what differs between the runs' provenance: versions
// (casestudy commit, torch, CUDA, NCCL, cuDNN), driver, GPUs and their UUIDs,
// host, the study file's sha256, and the NCCL_/CUDA_ environment.
func changedBetween(old, new *Summary) []ProvChange {
	o, n := &old.Provenance, &new.Provenance
	var out []ProvChange
	add := func(what, a, b string) {
		if a != b {
			out = append(out, ProvChange{What: what, Old: orNone(a), New: orNone(b)})
		}
	}
	add("casestudy (commit)", o.Casestudy, n.Casestudy)
	add("torch", o.Torch, n.Torch)
	add("CUDA (torch's)", o.CUDA, n.CUDA)
	add("NCCL", o.NCCL, n.NCCL)
	add("cuDNN", o.CuDNN, n.CuDNN)
	add("cuDNN the ranks loaded", strings.Join(o.CuDNNLoaded, ", "), strings.Join(n.CuDNNLoaded, ", "))
	add("library files the ranks loaded", strings.Join(o.Libraries, "; "), strings.Join(n.Libraries, "; "))
	add("driver", o.Driver, n.Driver)
	add("CUDA driver", o.CUDADriver, n.CUDADriver)
	add("GPUs", strings.Join(o.GPUs, ", "), strings.Join(n.GPUs, ", "))
	add("GPU UUIDs", strings.Join(o.GPUUUIDs, ", "), strings.Join(n.GPUUUIDs, ", "))
	add("host", o.Host, n.Host)
	add("CPU", o.CPU, n.CPU)
	add("study sha256", o.StudySHA256, n.StudySHA256)
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(o.Env, n.Env))) {
		add("env "+k, o.Env[k], n.Env[k])
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func mergeKeys(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// rowName is a compared trial by its knobs and ID: "micro_batch=32 (1537e079)".
func (c *Comparison) rowName(id string) string {
	for _, r := range c.Rows {
		if r.ID == id && r.Knobs != "" {
			return r.Knobs + " (" + id + ")"
		}
	}
	return id
}

// rowNames names each ID by its knobs.
func (c *Comparison) rowNames(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = c.rowName(id)
	}
	return out
}

// LinkReports sets each side's Report: the path of its report.html relative
// to the folder the comparison is written to, when the side is a run
// directory that has one.
func LinkReports(c *Comparison, outPath string) {
	for _, sd := range []*Side{&c.Old, &c.New} {
		if fi, err := os.Stat(sd.Path); err == nil && fi.IsDir() {
			sd.Report = reportLink(sd.Path, outPath)
		}
	}
}

// reportLink is runDir's report.html relative to the folder of outPath (the
// working directory for "" or "-": standard output), "" when it has none.
func reportLink(runDir, outPath string) string {
	dir := "."
	if outPath != "" && outPath != "-" {
		dir = filepath.Dir(outPath)
	}
	page, err := filepath.Abs(filepath.Join(runDir, "report.html"))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(page); err != nil {
		return ""
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(absDir, page)
	if err != nil {
		return filepath.ToSlash(page)
	}
	return filepath.ToSlash(rel)
}
