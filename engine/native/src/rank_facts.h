// rank_facts.h: facts of the process a rank runs in that the runner cannot see
// from outside (on Slurm the rank may be on another node, bound by the
// scheduler): the CPUs its affinity mask allows and its GPU's identity.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

namespace cs {

// CPUs in this process's affinity mask (sched_getaffinity: what a cpuset,
// taskset or Slurm's --cpu-bind leaves it), at least 1; hardware_concurrency
// where the mask cannot be read.
int affinity_cpus();

// {"gpu_uuid":"GPU-...","pci_bus_id":"0000:3B:00.0"} of a CUDA device (as
// nvidia-smi prints them); {} on the CPU.
nlohmann::json gpu_identity(const torch::Device& d);

}  // namespace cs
