#!/usr/bin/env bash
# Builds gelu_bwd_probe (gelu_bwd.cu: the engine's GELU backward kernel against
# plain elementwise kernels of the same traffic, docs/perf.md "Twenty-fourth
# session") from the engine's own CUDA sources. Not part of `make engine`.
#
#   engine/native/tools/kernel_probe/build.sh [OUT_DIR]   (default build/kernel-probe)
#
# nvcc: $NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc. Architecture: CUDA_ARCH (90).
# Run: OUT_DIR/gelu_bwd_probe [--rows 16384 --cols 4096 --tanh-cols 3072 --iters 30 --warmup 5 --reps 10]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../src/cuda"
out="${1:-build/kernel-probe}"
arch="${CUDA_ARCH:-90}"
nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null; then nvcc="$(command -v nvcc)"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc
  else echo "kernel-probe build: no nvcc (set NVCC, or put the CUDA toolkit's bin on PATH)" >&2; exit 2; fi
fi
mkdir -p "$out"
"$nvcc" -std=c++17 -O3 -arch="sm_$arch" -I"$src" -o "$out/gelu_bwd_probe" \
  "$here/gelu_bwd.cu" "$src/bias_act.cu" "$src/column_sum.cu" "$src/device.cu"
echo "kernel-probe: $out/gelu_bwd_probe"
