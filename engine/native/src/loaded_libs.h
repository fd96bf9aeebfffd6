// loaded_libs.h: which copy of each GPU library this process runs. The engine
// links some of torch's libraries itself (NCCL; cuDNN for resnet.fusion), and
// the dynamic loader resolves a soname once per process: whoever loads it
// first decides the copy. A Go worker or cs_bench.py loads the engine before
// torch, so the engine's RUNPATH picks the copy, and a system cuDNN found
// before torch's wheel would serve torch's attention and convolutions too
// (docs/perf.md, "Twenty-third session"). These facts go into cs_build_info
// and the trainer's info so that every result says what ran.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cs {

// {"libcudnn.so.9": "/path/libcudnn.so.9", ...}: the loaded objects among
// cuDNN, NCCL, cuBLAS(Lt), the CUDA runtime and torch's own libraries, each by
// the path the loader opened (dl_iterate_phdr); absent when not loaded.
nlohmann::json loaded_libraries();

// cudnnGetVersion() of the cuDNN loaded in this process (e.g. "91900"), ""
// when none is loaded yet. Not a load: a process without cuDNN stays so.
std::string cudnn_runtime_version();

}  // namespace cs
