# Next call ZERO2 (scripts/gpu-next/README.md): ZeRO-2's gradient memory (issue 39). OUT is the run tool's.
W=/tmp/resZ2; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests" NATIVE_SUITES="zero reducer" \
  TEST_RUN='^TestGPU(ZeroGradientMemory|ZeroWorldOfOne|StagedZero)$' \
  EST_TESTS=200 CAP_TESTS=300 BUDGET_S=${Z2_BUDGET:-520} OUT=$W/z scripts/gpu-check.sh > $W/z.log 2>&1; echo "zero2 rc=$? at $SECONDS s"
grep -E '^- ' $W/z/table.md | cut -c1-300 | head -20
grep -hE -- '^\s*--- (FAIL|PASS)|^FAIL|panic|gpu_zero_mem_test.go' build/gpu-check/logs/test-*.out 2>/dev/null | cut -c1-400 | head -30
grep -E "^(ok|FAIL)" build/gpu-check/logs/native-tests-*.out | cut -c1-140
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
