package main

import (
	"errors"
	"os"

	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/provenance/nvmlgpu"
	"github.com/casestudy/casestudy/study"
)

// nodeGPUs opens NVML once for what the planner needs of this node: how
// many GPUs this process may use (NVML's count, narrowed by
// CUDA_VISIBLE_DEVICES) and the lowest compute capability of its GPUs (89 =
// 8.9); 0 and 0 without a GPU or a driver.
func nodeGPUs() (count, computeCap int) {
	g := nvmlgpu.Open()
	defer g.Close()
	computeCap = g.ComputeCapability()
	info, err := g.Info()
	if err != nil || len(info.GPUs) == 0 {
		return 0, computeCap
	}
	return min(len(launch.VisibleGPUs(os.Environ(), len(info.GPUs))), len(info.GPUs)), computeCap
}

// resolveGPUs gives a study with workload.gpus: all this node's GPU count
// (a --gpus override already replaced it), and, where this node runs it, the
// compute capability of its GPUs (the planner drops precision fp8 below 8.9).
// A batch job submitted from a login node cannot count the GPUs it will get:
// it needs --gpus.
func resolveGPUs(s *study.Study, submit bool) error {
	if s.Workload.GPUsAll && submit {
		return exitcode.Usage(errors.New(s.Path + ": workload.gpus is all, the GPUs of the node that runs it, which a login node cannot count: give --gpus N with --submit"))
	}
	if submit || (s.Workload.Device == "cpu" && !s.Workload.GPUsAll) {
		return nil
	}
	count, computeCap := nodeGPUs()
	if s.Workload.Device != "cpu" {
		s.Workload.ComputeCap = computeCap
	}
	if s.Workload.GPUsAll {
		s.ResolveGPUs(count)
	}
	return nil
}
