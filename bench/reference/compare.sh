#!/usr/bin/env bash
# compare.sh: the engine against its PyTorch references on one GPU, with an
# engine library already built: the benchmark stages of scripts/gpu-check.sh
# (engine through engine/native/tools/cs_bench.py, the references eager and
# under torch.compile), without its build and tests, with a time budget of
# BUDGET_S seconds (default 3600). Writes OUTDIR/table.md and
# OUTDIR/bench.jsonl (every JSON line, with its "group"), OUTDIR/logs.tgz, and
# prints the table last.
#
# usage: bench/reference/compare.sh ENGINE_LIB [OUTDIR] [gpt|bert|resnet50]...
#   ENGINE_LIB  libcasestudy_engine.so built with CUDA (make engine on the GPU machine)
#   families    default: gpt bert resnet50 (bert is 128 and 512 tokens)
# Environment: as scripts/gpu-check.sh (STEPS, WARMUP, BUDGET_S, WORK...).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
lib=$1 out=${2:-build/compare}
shift $(($# < 2 ? $# : 2))
[[ -f $lib ]] || { echo "compare.sh: no engine library at $lib (build it with make engine)" >&2; exit 2; }
stages=()
for fam in "${@:-gpt bert resnet50}"; do
  for f in $fam; do
    case $f in
      gpt | resnet50) stages+=("$f") ;;
      bert) stages+=(bert128 bert512) ;;
      *) echo "compare.sh: unknown family $f (gpt, bert or resnet50)" >&2; exit 2 ;;
    esac
  done
done
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root" || exit 2
ENGINE_LIB=$lib OUT=$out WORK=${WORK:-$out/work} BUDGET_S=${BUDGET_S:-3600} STAGES="${stages[*]}" \
  exec scripts/gpu-check.sh
