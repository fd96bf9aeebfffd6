W=/tmp/res; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader
STAGES="tests fp8" FP8_REF=0 FP8_SIZES="124m 350m 774m" FP8_BERT=1 BUDGET_S=470 OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | head -40
sed -n '/fp8/,$p' $W/chk/table.md | grep '^|' | head -30
grep -hE -- '--- FAIL|^FAIL|panic' $W/chk/logs/test-*.out 2>/dev/null | head -20
grep -hE 'BF16|bf16' $W/chk/logs/test-engine.out | head -20
(build/engine/cs_native_tests tp > $W/tp.out 2> $W/tp.err; echo "tp rc=$?") ; tail -5 $W/tp.out; tail -20 $W/tp.err
ls $W/chk/logs | grep native-tests-tp; cat $W/chk/logs/native-tests-tp.* 2>/dev/null | tail -10
tar czf $OUT/all.tgz -C $W . ; ls $OUT
# then, on the same warm machine (call 10):
W=/tmp/res2; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
SKIP_BUILD=1 STAGES="predict" BUDGET_S=420 OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | head -20; tail -30 $W/chk/predict-rehearsal.md 2>/dev/null; tail -20 $W/chk/predict.md 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; ls $OUT
