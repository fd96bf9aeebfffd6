#!/usr/bin/env bash
# Builds cudnn_fusion_probe (probe.cu, docs/resnet-fusion.md) against cuDNN 9's backend API.
# Not part of `make engine`: only `make cudnn-fusion-probe` or this script builds it.
#
#   engine/native/tools/cudnn_fusion/build.sh [--compile-only] [OUT_DIR]   (default build/cudnn-fusion)
#
# cuDNN is looked for, first hit wins:
#   CUDNN_INCLUDE + CUDNN_LIB          explicit directories (cudnn_graph.h; libcudnn.so.9)
#   CUDNN_ROOT                         ROOT/include, ROOT/lib or ROOT/lib64
#   the nvidia-cudnn wheel of $PYTHON  (default /opt/torch/.venv/bin/python, then python3):
#                                      site-packages/nvidia/cudnn/{include,lib}, as torch's wheel
#                                      installs it on the GPU machine
#   /usr/include + /usr/lib/x86_64-linux-gnu, /usr/local/cuda/{include,lib64}
# --compile-only: compile to an object, no library needed (checks the code against the headers).
# nvcc: $NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc. Architecture: CUDA_ARCH (90).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
compile_only=0
if [[ "${1:-}" == "--compile-only" ]]; then compile_only=1; shift; fi
out="${1:-build/cudnn-fusion}"
arch="${CUDA_ARCH:-90}"

die() { echo "cudnn-fusion build: $*" >&2; exit 2; }

nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null; then nvcc="$(command -v nvcc)"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then nvcc=/usr/local/cuda/bin/nvcc
  else die "no nvcc (set NVCC, or put the CUDA toolkit's bin on PATH)"; fi
fi

searched=()
inc="" lib=""
try() {  # try INCLUDE_DIR LIB_DIR...: the first LIB_DIR with libcudnn.so.9 beside a cudnn_graph.h
  local i="$1"; shift
  searched+=("$i")
  [[ -f "$i/cudnn_graph.h" ]] || return 1
  if (( compile_only )); then inc="$i"; return 0; fi
  local l
  for l in "$@"; do
    if [[ -e "$l/libcudnn.so.9" ]]; then inc="$i"; lib="$l"; return 0; fi
    searched+=("$l (no libcudnn.so.9)")
  done
  return 1
}
found=0
if [[ -n "${CUDNN_INCLUDE:-}" ]]; then
  try "$CUDNN_INCLUDE" "${CUDNN_LIB:-/nonexistent}" && found=1 || die "CUDNN_INCLUDE=$CUDNN_INCLUDE CUDNN_LIB=${CUDNN_LIB:-} lack cudnn_graph.h or libcudnn.so.9"
fi
if (( !found )) && [[ -n "${CUDNN_ROOT:-}" ]]; then
  try "$CUDNN_ROOT/include" "$CUDNN_ROOT/lib" "$CUDNN_ROOT/lib64" && found=1 || die "CUDNN_ROOT=$CUDNN_ROOT lacks include/cudnn_graph.h or lib/libcudnn.so.9"
fi
if (( !found )); then
  for py in "${PYTHON:-/opt/torch/.venv/bin/python}" python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    root="$("$py" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
    if [[ -n "$root" ]] && try "$root/include" "$root/lib" "$root/lib64"; then found=1; break; fi
    # Another wheel layout (a CUDA-versioned nvidia/ tree): the header and library where they are.
    sp="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)"
    [[ -n "$sp" && -d "$sp/nvidia" ]] || continue
    h="$(find "$sp/nvidia" -name cudnn_graph.h 2>/dev/null | head -1)"
    l="$(find "$sp/nvidia" -name libcudnn.so.9 2>/dev/null | head -1)"
    if [[ -n "$h" ]] && try "$(dirname "$h")" "$(dirname "${l:-/nonexistent/x}")"; then found=1; break; fi
  done
fi
if (( !found )); then
  try /usr/include /usr/lib/x86_64-linux-gnu && found=1 || \
    try /usr/local/cuda/include /usr/local/cuda/lib64 && found=1 || true
fi
(( found )) || die "cuDNN 9 not found (need cudnn_graph.h and libcudnn.so.9); looked in: ${searched[*]}. Set CUDNN_ROOT, or CUDNN_INCLUDE and CUDNN_LIB."

ver="$(awk '{sub(/\r$/, "")} /#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{printf "%s%s", sep, $3; sep="."}' "$inc/cudnn_version.h" 2>/dev/null || true)"
[[ "$ver" == 9.* ]] || die "$inc/cudnn_version.h says cuDNN '${ver:-?}', the probe needs cuDNN 9"
mkdir -p "$out"
# -I src: the graph-building header is the engine's (src/cudnn_fusion_graph.h), one copy for both.
flags=(-std=c++17 -O2 "-arch=sm_$arch" -I"$inc" -I"$here/../../src" -Xcompiler -Wall)
if (( compile_only )); then
  "$nvcc" "${flags[@]}" -c "$here/probe.cu" -o "$out/probe.o"
  echo "compiled $out/probe.o against $inc (cuDNN $ver headers), $("$nvcc" --version | tail -1)"
else
  "$nvcc" "${flags[@]}" "$here/probe.cu" -o "$out/cudnn_fusion_probe" -L"$lib" -l:libcudnn.so.9 -Xlinker -rpath="$lib"
  echo "$lib" > "$out/cudnn_lib_dir"  # for LD_LIBRARY_PATH: libcudnn.so.9 opens its sub-libraries
  echo "built $out/cudnn_fusion_probe against $inc (cuDNN $ver headers), $lib/libcudnn.so.9"
fi
