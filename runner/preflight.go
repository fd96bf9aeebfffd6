package runner

import (
	"fmt"
	"os"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance"
	"github.com/casestudy/casestudy/study"
)

// Machine is what preflight found: where trials run.
type Machine struct {
	Device     string           // cpu | cuda (workload.device auto resolved)
	GPUs       []string         // CUDA_VISIBLE_DEVICES entries available to trials
	EngineLib  string           // the checked engine library
	Build      engine.BuildInfo // its build facts
	MPSControl string           // nvidia-cuda-mps-control, "" when absent
	NVML       provenance.GPUs  // the GPUs' facts and live readers (nil: none)
	// NVLink: this host's GPUs share NVLink (nvidia-smi topo -m), so NCCL's
	// intra-node channels must be P2P (provenance.TransportTaint).
	NVLink bool
	// Rehearse: every trial runs as a rehearsal (runner/rehearse.go): its
	// ranks share the GPUs present, host-staged.
	Rehearse bool
	// DPWorldOfOne runs a world of one as DDP with one process (dist.backend
	// set: the reducer buckets, times each bucket's ready time and honours the
	// ddp knobs), the one-GPU input of `casestudy run --predict` (docs/predict.md).
	DPWorldOfOne bool
}

// ProbeEngine finds the engine library (explicit: the --engine-lib value),
// loads it, checks its ABI and reads its build facts: binding.Probe. The runner
// takes it as a function so that it needs no cgo.
type ProbeEngine func(explicit string) (path string, bi engine.BuildInfo, err error)

// Preflight loads the engine library once through probe (ABI check), finds the
// GPUs through gpus (provenance/nvmlgpu; nil: none) and resolves the device;
// a study this machine cannot run stops here, before the first trial, with an
// environment error (exit status 3).
func Preflight(s *study.Study, plan *study.Plan, probe ProbeEngine, gpus provenance.GPUs, engineLib string, env []string) (*Machine, error) {
	path, bi, err := probe(engineLib)
	if err != nil {
		return nil, err
	}
	count := bi.DeviceCount
	if gpus != nil {
		if g, err := gpus.Info(); err == nil {
			count = len(g.GPUs)
		}
	}
	if !bi.CUDAAvailable {
		count = 0
	}
	m := &Machine{EngineLib: path, Build: bi, GPUs: launch.VisibleGPUs(env, count),
		MPSControl: FindMPSControl(getenv(env, "PATH")), NVML: gpus}
	if count == 0 {
		m.GPUs = nil
	}
	if err := resolveDevice(s, plan, m); err != nil {
		return m, err
	}
	if m.Device == "cuda" && len(m.GPUs) > 1 {
		m.NVLink = provenance.HasNVLink(provenance.TopoMatrix())
	}
	return m, nil
}

func resolveDevice(s *study.Study, plan *study.Plan, m *Machine) error {
	smoke := fmt.Sprintf("studies/%s/smoke.yaml", s.Model.Family)
	switch s.Workload.Device {
	case "cpu":
		m.Device = "cpu"
		return nil
	case "cuda":
		if len(m.GPUs) == 0 {
			return exitcode.With(exitcode.Environment, fmt.Errorf(
				"%s asks for device cuda, but this machine has no usable GPU (engine built with CUDA: %v); try %s on this machine",
				s.Path, m.Build.CUDAAvailable, smoke))
		}
		m.Device = "cuda"
	default: // auto: the GPUs when the engine and the machine have them, else CPU ranks
		m.Device = "cpu"
		if len(m.GPUs) > 0 {
			m.Device = "cuda"
		}
	}
	if m.Device != "cuda" {
		return nil
	}
	need := 0
	for _, t := range plan.Trials {
		need = max(need, s.PlacementFor(t.Knobs, "cuda").GPUsPerNode)
	}
	if need > len(m.GPUs) && !s.Workload.Rehearse { // a rehearsal shares the GPUs present
		return exitcode.With(exitcode.Environment, fmt.Errorf(
			"%s needs %d GPUs per trial; %d visible (CUDA_VISIBLE_DEVICES, NVML); try %s or lower workload.gpus",
			s.Path, need, len(m.GPUs), smoke))
	}
	return nil
}

// getenv is key in env (launch.LookupEnv), or in this process's environment
// when env is nil.
func getenv(env []string, key string) string {
	if env == nil {
		return os.Getenv(key)
	}
	v, _ := launch.LookupEnv(env, key)
	return v
}
