W=/tmp/res; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT
STAGES="tests fp8" FP8_REF=0 FP8_SIZES="124m" FP8_BERT=0 BUDGET_S=255 OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E "^- " $W/chk/table.md | cut -c1-600 | head -40
grep -hE -- '--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
if grep -q -- '--- FAIL: TestGPUBF16' build/gpu-check/logs/test-engine.out 2>/dev/null; then (cd engine/binding && CASESTUDY_GPU_TESTS=1 CASESTUDY_KERNELS=none CASESTUDY_ENGINE_LIB=$PWD/../../build/engine/libcasestudy_engine.so ../../build/gpu/engine.test -test.run TestGPUBF16TracksFP32 -test.v > $W/bf16-nokernels.log 2>&1; echo "bf16 without kernels rc=$?"; grep -E -- '--- |step' $W/bf16-nokernels.log | head); fi
tar czf $OUT/all.tgz -C $W . ; ls $OUT
