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
)

func init() { register(newDoctorCommand) }

func newDoctorCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say what this machine offers for studies and what is missing",
		Long: `Doctor checks the GPUs and driver (NVML), the topology (nvidia-smi topo -m),
the engine library and its ABI, torch/CUDA/NCCL versions, the MPS control
binary and the free disk for results. Each missing piece comes with its fix.
It exits 0 when CPU studies can run (studies/*/smoke.yaml), 3 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.OutOrStdout(), engineLibFlag(cmd), out)
		},
	}
	cmd.Flags().StringVar(&out, "out", "results", "results folder whose free disk space to check")
	return cmd
}

// minFreeBytes is the free space below which doctor warns (logs and per-step
// samples of a large sweep take a few hundred MB).
const minFreeBytes = 1 << 30

func runDoctor(w io.Writer, engineLib, out string) error {
	ok := func(name, format string, a ...any) {
		fmt.Fprintf(w, "  ok    %-9s %s\n", name, fmt.Sprintf(format, a...))
	}
	miss := func(name, what, fix string) { fmt.Fprintf(w, "  MISS  %-9s %s\n        fix: %s\n", name, what, fix) }
	var gpuMissing []string

	nvml := nvmlgpu.Open()
	defer nvml.Close()
	h := provenance.ReadHost(nvml)
	fmt.Fprintln(w, "casestudy doctor")
	ok("host", "%s, %s, %d cores, %.1f GiB", h.Hostname, h.CPU, h.CPUs, float64(h.MemBytes)/(1<<30))

	gpus, nvmlErr := nvml.Info()
	switch {
	case nvmlErr != nil:
		miss("gpus", "no NVIDIA driver ("+nvmlErr.Error()+")", "install the NVIDIA driver to run GPU studies; CPU studies need none")
		gpuMissing = append(gpuMissing, "the NVIDIA driver")
	case len(gpus.GPUs) == 0:
		miss("gpus", "the driver sees no GPU", "check the container's GPU access (--gpus all) and CUDA_VISIBLE_DEVICES")
		gpuMissing = append(gpuMissing, "a visible GPU")
	default:
		ok("driver", "%s (CUDA %s)", gpus.Driver, gpus.CUDADriver)
		for _, g := range gpus.GPUs {
			ok("gpu", "%d %s %.0f GiB, %d NVLinks, %s, %s", g.Index, g.Name, float64(g.MemBytes)/(1<<30), g.NVLinks, g.PCIBus, g.UUID)
		}
	}
	if smi := provenance.NvidiaSMI(); smi == "" {
		miss("topology", "nvidia-smi not found (no `nvidia-smi topo -m` matrix in the manifests)",
			"install the NVIDIA driver utilities (nvidia-smi) or add /usr/local/nvidia/bin to PATH")
	} else if topo := provenance.TopoMatrix(); topo == "" {
		miss("topology", smi+" topo -m failed", "run it by hand to see why")
	} else {
		ok("topology", "%s topo -m:\n%s", smi, indent(topo, "        "))
	}

	path, bi, err := binding.Probe(engineLib)
	engineOK := err == nil
	if engineOK {
		ok("engine", "%s", path)
		ok("abi", "%d (this casestudy speaks %d)", bi.ABI, binding.ABIVersion)
		ok("torch", "%s, CUDA %s, NCCL %s, cuDNN %s, Gloo %v", orNone(bi.Torch), orNone(bi.CUDA), orNone(bi.NCCL), orNone(bi.CuDNN), bi.Gloo)
		if !bi.CUDAAvailable {
			miss("cuda", "the engine was built without CUDA or sees no device", "build the engine against a CUDA torch (pip install torch; make engine) for GPU studies")
			gpuMissing = append(gpuMissing, "a CUDA engine build")
		} else {
			ok("cuda", "%d devices visible to the engine", bi.DeviceCount)
		}
	}
	if !engineOK {
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

	if mps := runner.FindMPSControl(os.Getenv("PATH")); mps != "" {
		ok("mps", "%s", mps)
	} else {
		miss("mps", runner.MPSControlName+" not found (trials with mps: true are recorded unsupported)",
			"install the NVIDIA driver utilities that ship nvidia-cuda-mps-control, or add /usr/local/nvidia/bin to PATH")
	}

	if free, err := provenance.FreeBytes(out); err != nil {
		miss("disk", fmt.Sprintf("cannot stat %s: %v", out, err), "create the folder or pass --out")
	} else if free < minFreeBytes {
		miss("disk", fmt.Sprintf("%.2f GiB free under %s", float64(free)/(1<<30), out), "free space or write results elsewhere with --out")
	} else {
		ok("disk", "%.1f GiB free under %s", float64(free)/(1<<30), out)
	}

	fmt.Fprintln(w)
	if !engineOK {
		fmt.Fprintln(w, "not usable yet: the engine library is missing; build it with `make engine`")
		return exitcode.Silent{Code: exitcode.Environment}
	}
	if len(gpuMissing) > 0 {
		fmt.Fprintf(w, "usable for CPU studies (studies/*/smoke.yaml); GPU studies also need %s\n", strings.Join(gpuMissing, ", "))
		return nil
	}
	fmt.Fprintln(w, "usable for CPU and GPU studies")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix)
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
