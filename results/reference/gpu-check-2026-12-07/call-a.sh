# Nineteenth session, call A: the engine built, the native suites (nccl_split, tp with its crash
# hunt, fp8_cast, fp8_linear's diagnostic modes) and the Go GPU tests of the merged work
# (ZeRO overlap, TPZeroDiagnose, TPStagedZero, TPFP16, the bf16 criterion, FP8). OUT is the run tool's.
W=/tmp/res; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; nproc
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests" TEST_RUN='^TestGPU(NCCLOneRank|ZeroWorldOfOne|StagedZero|TPStagedZero|TPZeroDiagnose|TPFP16Staged|TPStaged|TPPipelineStaged|BF16TracksFP32|WorldOfOnePaths|FP8.*|GraphsMatchEager)$' \
  CAP_TESTS=${CAP_TESTS:-240} BUDGET_S=$((${T1:-500}-SECONDS)) OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | cut -c1-300 | head -20
grep -hE -- '^\s*--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
grep -E "^(ok|FAIL)" build/gpu-check/logs/native-tests-*.out | cut -c1-140
grep -h -A30 'ZeRO-2 against DDP' build/gpu-check/logs/test-engine.out 2>/dev/null | head -40
cat build/gpu-check/logs/native-hunt-tp-*.err 2>/dev/null | tail -30
mkdir -p $W/chklogs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/chklogs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
