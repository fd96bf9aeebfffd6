# Twentieth session, call A: build, then issue 39's mends (the Gloo issue lock: tp suite + its hunt;
# TestGPUTPStagedZero's fp16 criterion), fp8_linear's MLP criterion, then the rehearsals of
# studies/gpt/tp.yaml, studies/bert/zero.yaml, studies/gpt/tppp.yaml. OUT is the run tool's.
W=/tmp/res; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; nproc; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests" NATIVE_SUITES="tp fp8_linear nccl_split" TP_HUNT=${TP_HUNT:-10} \
  TEST_RUN='^TestGPU(TPStagedZero|TPZeroDiagnose|StagedZero|ZeroWorldOfOne)$' \
  CAP_TESTS=${CAP_TESTS:-200} BUDGET_S=$((${T1:-330}-SECONDS)) OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | cut -c1-300 | head -20
grep -hE -- '^\s*--- (FAIL|PASS)|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -30
grep -E "^(ok|FAIL|PASS)|criterion|within" build/gpu-check/logs/native-tests-*.out | cut -c1-200 | head -40
tail -5 build/gpu-check/logs/native-hunt-tp-*.err 2>/dev/null | tail -20
mkdir -p $W/chklogs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/chklogs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . 
OUT=$W/rh LAUNCH_S=20 BUDGET_S=$((575-SECONDS)) STUDIES="studies/gpt/tp.yaml studies/bert/zero.yaml studies/gpt/tppp.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"
grep -E '^## |^- studies|checksums|\*\*losses|refused|skipped|DISAGREE|agree' $W/rh/rehearse.md | cut -c1-300 | head -50
tail -5 $W/rehearse.log
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
