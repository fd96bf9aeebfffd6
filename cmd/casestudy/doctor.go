package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/engine/binding"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/provenance/nvmlgpu"
	"github.com/casestudy/casestudy/runner"
	"github.com/casestudy/casestudy/store"
)

func init() { register(newDoctorCommand) }

func newDoctorCommand() *cobra.Command {
	var out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say what this machine offers for studies and what is missing",
		Long: `Doctor checks the GPUs and driver (NVML), the topology (nvidia-smi topo -m),
the engine library and its ABI, torch/CUDA/NCCL versions, the MPS control
binary and the free disk for results. Each missing piece comes with its fix.
It exits 0 when CPU studies can run (studies/*/smoke.yaml), 3 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nvml := nvmlgpu.Open()
			defer nvml.Close()
			rep := diagnose(thisMachine(nvml), engineLibFlag(cmd), out)
			var err error
			if asJSON {
				err = writeJSON(cmd.OutOrStdout(), rep)
			} else {
				printDoctor(cmd.OutOrStdout(), rep)
			}
			if err == nil && !rep.EngineOK {
				err = exitcode.Silent{Code: exitcode.Environment}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&out, "out", "results", "results folder whose free disk space to check")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

// minFreeBytes is the free space below which doctor warns (logs and per-step
// samples of a large sweep take a few hundred MB).
const minFreeBytes = 1 << 30

// machine is what doctor asks of this machine; tests give a made-up one.
type machine struct {
	host   func() store.Host
	gpus   func() (provenance.GPUInfo, error)
	smi    func() string // the nvidia-smi path, "" when missing
	topo   func() string // nvidia-smi topo -m, "" when it failed
	engine func(explicit string) (string, engine.BuildInfo, error)
	mps    func() string // nvidia-cuda-mps-control's path, "" when missing
	free   func(path string) (uint64, error)
	load   func() (float64, error) // the 1-minute load average; nil: not checked
}

// thisMachine asks the machine itself, its GPUs through nvml.
func thisMachine(nvml provenance.GPUs) machine {
	return machine{host: func() store.Host { return provenance.ReadHost(nvml) }, gpus: nvml.Info, smi: provenance.NvidiaSMI,
		topo: provenance.TopoMatrix, engine: binding.Probe, free: provenance.FreeBytes,
		mps: func() string { return runner.FindMPSControl(os.Getenv("PATH")) }, load: loadAverage}
}

// doctorReport is what doctor found (`casestudy doctor --json`).
type doctorReport struct {
	Checks   []doctorCheck `json:"checks"`
	EngineOK bool          `json:"engine_ok"` // CPU studies can run
	GPUNeeds []string      `json:"gpu_studies_need,omitempty"`
	Verdict  string        `json:"verdict"`
}

// doctorCheck is one line of the report: ok, or missing with its fix.
type doctorCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func diagnose(m machine, engineLib, out string) *doctorReport {
	r := &doctorReport{Checks: []doctorCheck{}}
	ok := func(name, format string, a ...any) {
		r.Checks = append(r.Checks, doctorCheck{Name: name, OK: true, Detail: fmt.Sprintf(format, a...)})
	}
	miss := func(name, what, fix string) {
		r.Checks = append(r.Checks, doctorCheck{Name: name, Detail: what, Fix: fix})
	}

	h := m.host()
	ok("host", "%s, %s, %d cores, %.1f GiB", h.Hostname, h.CPU, h.CPUs, float64(h.MemBytes)/(1<<30))
	gpus, nvmlErr := m.gpus()
	switch {
	case nvmlErr != nil:
		miss("gpus", "no NVIDIA driver ("+nvmlErr.Error()+")", "install the NVIDIA driver to run GPU studies; CPU studies need none")
		r.GPUNeeds = append(r.GPUNeeds, "the NVIDIA driver")
	case len(gpus.GPUs) == 0:
		miss("gpus", "the driver sees no GPU", "check the container's GPU access (--gpus all) and CUDA_VISIBLE_DEVICES")
		r.GPUNeeds = append(r.GPUNeeds, "a visible GPU")
	default:
		ok("driver", "%s (CUDA %s)", gpus.Driver, gpus.CUDADriver)
		for _, g := range gpus.GPUs {
			ok("gpu", "%d %s %.0f GiB, %d NVLinks, %s, %s", g.Index, g.Name, float64(g.MemBytes)/(1<<30), g.NVLinks, g.PCIBus, g.UUID)
		}
	}
	if smi := m.smi(); smi == "" {
		miss("topology", "nvidia-smi not found (no `nvidia-smi topo -m` matrix in the manifests)",
			"install the NVIDIA driver utilities (nvidia-smi) or add /usr/local/nvidia/bin to PATH")
	} else if topo := m.topo(); topo == "" {
		miss("topology", smi+" topo -m failed", "run it by hand to see why")
	} else {
		ok("topology", "%s topo -m:\n%s", smi, strings.TrimRight(topo, "\n"))
	}

	path, bi, err := m.engine(engineLib)
	r.EngineOK = err == nil
	if r.EngineOK {
		ok("engine", "%s", path)
		ok("abi", "%d (this casestudy speaks %d)", bi.ABI, binding.ABIVersion)
		ok("torch", "%s, CUDA %s, NCCL %s, cuDNN %s, Gloo %v", orNone(bi.Torch), orNone(bi.CUDA), orNone(bi.NCCL), orNone(bi.CuDNN), bi.Gloo)
		if !cudnnCopy(bi, ok, miss) {
			r.GPUNeeds = append(r.GPUNeeds, "the cuDNN torch was built with")
		}
		if !bi.CUDAAvailable {
			miss("cuda", "the engine was built without CUDA or sees no device", "build the engine against a CUDA torch (pip install torch; make engine) for GPU studies")
			r.GPUNeeds = append(r.GPUNeeds, "a CUDA engine build")
		} else {
			ok("cuda", "%d devices visible to the engine", bi.DeviceCount)
		}
	} else {
		what, hint := err.Error(), "make engine (or point --engine-lib / $CASESTUDY_ENGINE_LIB at libcasestudy_engine.so)"
		var le *engine.LoadError
		if errors.As(err, &le) {
			what = le.Err.Error()
			if le.Path != "" {
				what = le.Path + ": " + what
			}
			if le.Hint != "" {
				hint = le.Hint
			}
		}
		miss("engine", firstLineOf(what), hint)
	}

	if mps := m.mps(); mps != "" {
		ok("mps", "%s", mps)
	} else {
		miss("mps", runner.MPSControlName+" not found (trials with mps: true are recorded unsupported)",
			"install the NVIDIA driver utilities that ship nvidia-cuda-mps-control, or add /usr/local/nvidia/bin to PATH")
	}

	if free, err := m.free(out); err != nil {
		miss("disk", fmt.Sprintf("cannot stat %s: %v", out, err), "create the folder or pass --out")
	} else if free < minFreeBytes {
		miss("disk", fmt.Sprintf("%.2f GiB free under %s", float64(free)/(1<<30), out), "free space or write results elsewhere with --out")
	} else {
		ok("disk", "%.1f GiB free under %s", float64(free)/(1<<30), out)
	}

	busy := false
	if m.load != nil {
		if l, err := m.load(); err == nil {
			if busy = isBusy(l, h.CPUs); busy {
				miss("load", fmt.Sprintf("busy host: load average %.1f over the last minute on %d cores", l, h.CPUs),
					"measure on an idle machine (see top for the other jobs): on a busy host the same trial swings from run to run, and CPU studies most")
			} else {
				ok("load", "%.1f over the last minute on %d cores", l, h.CPUs)
			}
		}
	}

	switch {
	case !r.EngineOK:
		r.Verdict = "not usable yet: the engine library is missing; build it with `make engine`"
	case len(r.GPUNeeds) > 0:
		r.Verdict = fmt.Sprintf("usable for CPU studies (studies/*/smoke.yaml); GPU studies also need %s", strings.Join(r.GPUNeeds, ", "))
	default:
		r.Verdict = "usable for CPU and GPU studies"
	}
	if busy && r.EngineOK {
		r.Verdict += "; the host is busy now, so measurements will swing"
	}
	return r
}

func printDoctor(w io.Writer, r *doctorReport) {
	fmt.Fprintln(w, "casestudy doctor")
	for _, c := range r.Checks {
		if c.OK {
			lines := strings.Split(c.Detail, "\n")
			fmt.Fprintf(w, "  ok    %-9s %s\n", c.Name, lines[0])
			for _, l := range lines[1:] {
				fmt.Fprintf(w, "        %s\n", l)
			}
			continue
		}
		fmt.Fprintf(w, "  MISS  %-9s %s\n        fix: %s\n", c.Name, c.Detail, c.Fix)
	}
	fmt.Fprintf(w, "\n%s\n", r.Verdict)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// isBusy says whether a 1-minute load average means other work shares the
// CPUs: above half the cores (and at least 1).
func isBusy(load float64, cpus int) bool {
	return load >= 1 && load > 0.5*float64(max(cpus, 1))
}

// loadAverage reads the 1-minute load average (Linux /proc/loadavg).
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err
}

// cudnnCopy reports which cuDNN the engine's process loaded: the loader takes
// one copy a process, and one of another major or minor version than torch
// was built with (a system libcudnn found first) runs torch's attention and
// convolutions too; it returns false then. Another patch level (a newer
// nvidia-cudnn in torch's own wheel directory) is reported, not flagged.
func cudnnCopy(bi engine.BuildInfo, ok func(string, string, ...any), miss func(string, string, string)) bool {
	if bi.CuDNNRuntime == "" {
		return true
	}
	path, same := engine.CuDNNCopy(bi.CuDNN, bi.CuDNNRuntime, bi.Libraries)
	if !same {
		miss("cudnn copy", fmt.Sprintf("loaded cuDNN %s from %s, torch was built with %s", bi.CuDNNRuntime, path, bi.CuDNN),
			"rebuild the engine (make engine: its RUNPATH leaves out what the loader finds by itself) and check LD_LIBRARY_PATH for another libcudnn.so.9")
		return false
	}
	ok("cudnn copy", "%s from %s (torch built with %s)", bi.CuDNNRuntime, path, orNone(bi.CuDNN))
	return true
}
