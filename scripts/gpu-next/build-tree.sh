# build-tree.sh SRC BUILD JOBS [CMAKE_ARGS...]: the engine library of the tree SRC (an
# engine/native folder, e.g. another commit's from git archive) built in BUILD as
# scripts/gpu-check.sh builds this one (Ninja, Release, CS_CUDA_ARCHS, default 90), with JOBS
# compile jobs; the library target only. Used by lib.sh; exit status cmake's.
set -u
src=$1 build=$2 jobs=$3
shift 3
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS="${CUDA_ARCHS:-90}" "$@" &&
  cmake --build "$build" -j "$jobs" --target casestudy_engine
