# Call AB-OLD: is the engine's ~4% slower GPT/BERT step of 2026-12-07 15:00 UTC (7242a59: GPT
# graphs 34.1 ms, BERT-large 512 76.5 ms; the references as before) the code or the card? Builds
# the engine at ed0acf6 (where GPT 32.7 and BERT 72.2 ms were measured) beside the current one
# and runs both through the same harness (gpu-check's gpt and bert512 stages, the library chosen
# by ENGINE_LIB) on one machine: new, old, new again. Needs the old source in ab-old/engine/native
# (git archive ed0acf6 engine/native | tar x -C ab-old; ab-old/ is ignored). Carry ab-old and .gloo.
# OUT is the run tool's. Run 2026-12-07 15:13 UTC: results/reference/gpu-check-2026-12-07f.
set -u
W=/tmp/resAB; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,temperature.gpu,clocks.sm --format=csv,noheader; git log -1 --format=%h; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
cmake -S ab-old/engine/native -B build/engine-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS=90 > $W/old-cmake.log 2>&1 &&
  cmake --build build/engine-old -j 16 --target casestudy_engine > $W/old-build.log 2>&1; echo "old build rc=$? at $SECONDS s"
tail -2 $W/old-build.log
run() { # NAME STAGES [ENGINE_LIB]
  local n=$1 st=$2 lib=${3:-}
  env ${lib:+ENGINE_LIB=$lib} BERT_OFF=res BERT_HF=0 STAGES="$st" BUDGET_S=${4:-200} WORK=$W/work-$n OUT=$W/$n \
    scripts/gpu-check.sh > $W/$n.log 2>&1; echo "$n rc=$? at $SECONDS s"
  grep -E '^\| engine|^\| (nano|fast)-' $W/$n/table.md | cut -d'|' -f2-4
}
run new1 "gpt bert512" "" 300
run old "gpt bert512" $PWD/build/engine-old/libcasestudy_engine.so 150
run new2 "gpt" $PWD/build/engine/libcasestudy_engine.so 60
nvidia-smi --query-gpu=temperature.gpu,clocks.sm,power.draw --format=csv,noheader
rm -rf $W/work-*/profiles; tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
