# Next call A (scripts/gpu-next/README.md). OUT is the run tool's.
W=/tmp/resA; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch profile" NATIVE_SUITES="tp shadow fp8_linear bn_relu:bn max_pool:pool" TP_HUNT=5 \
  TEST_RUN='^TestGPU(StagedZero|TPStagedZero|TPStaged|FamilyGraphsMatchEager|GraphsStudyCombos)$' \
  RESNET_BATCHES="256 384" PROFILE_MODELS=resnet50 PROFILE_RESNET_MB=384 \
  CAP_TESTS=200 BUDGET_S=540 OUT=$W/a scripts/gpu-check.sh > $W/a.log 2>&1; echo "a rc=$? at $SECONDS s"
grep -E '^- ' $W/a/table.md | cut -c1-300 | head -30
grep -hE -- '^\s*--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
grep -E "^(ok|FAIL)" build/gpu-check/logs/native-tests-*.out | cut -c1-140
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
