W=/tmp/res; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; nproc; cat /proc/loadavg
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
cmake -S engine/native -B build/engine -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS=90 > $W/pre-cmake.log 2>&1
if cmake --build build/engine --target CMakeFiles/casestudy_engine.dir/src/pipeline_group_nccl.cpp.o > $W/pre-nccl.log 2>&1; then echo "nccl object ok at $SECONDS s"; else echo "NCCL OBJECT FAILED at $SECONDS s: fallback"; grep -m5 -E "error" $W/pre-nccl.log; cp .gloo/fallback/pipeline_group_nccl.cpp engine/native/src/; fi
mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -dc 0-9)
ST="tests resnet50-batch"; ((mib > 100000)) && ST="tests" T1=${T1:-300} CAP_TESTS=${CAP_TESTS:-180}
CASESTUDY_BF16_DIAGNOSE=1 STAGES="$ST" CAP_TESTS=${CAP_TESTS:-240} BUDGET_S=$((${T1:-470}-SECONDS)) OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | cut -c1-400 | head -30
grep -A8 -E '^### resnet50 (320|384)' $W/chk/table.md | grep -E '^\| (engine|tv)' | cut -c1-200
grep -hE -- '--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
grep -h -A12 'TestGPUBF16Diagnose' build/gpu-check/logs/test-engine.out 2>/dev/null | grep -vE '^\s*$' | head -24
mkdir -p $W/chklogs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/chklogs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "packed at $SECONDS s"
if ((mib > 100000)); then
  mkdir -p $W/rh; OUT=$W/rh LAUNCH_S=20 BUDGET_S=$((560-SECONDS)) STUDIES="studies/bert/ddp8-quick.yaml studies/gpt/multinode.yaml studies/resnet50/multinode.yaml studies/bert/multinode.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"
  grep -E '^## |^- studies|checksums|\*\*losses|refused|skipped' $W/rh/rehearse.md | cut -c1-300 | head -40
elif ((SECONDS < ${T2:-470})); then
  SKIP_BUILD=1 STAGES="predict-cpu" BUDGET_S=$((585-SECONDS)) OUT=$W/pchk scripts/gpu-check.sh > $W/pchk.log 2>&1; echo "predict rc=$? at $SECONDS s"
  grep -E '^- ' $W/pchk/table.md | cut -c1-600; cat $W/pchk/predict-cpu.md 2>/dev/null | head -30
fi
tar czf $OUT/all.tgz -C $W . ; ls $OUT; echo "end at $SECONDS s"
