W=/tmp/res; mkdir -p $W/rh
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT
STAGES="tests" CAP_TESTS=160 BUDGET_S=270 OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | cut -c1-300 | head -30
grep -hE -- '--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
OUT=$W/rh LAUNCH_S=20 BUDGET_S=$((575-SECONDS)) STUDIES="studies/bert/zero.yaml studies/gpt/tp.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"
grep -E '^## |^- studies|checksums|\*\*losses|refused|skipped' $W/rh/rehearse.md | cut -c1-300 | head -50
tail -5 $W/rehearse.log
tar czf $W/logs.tgz -C build/gpu-check logs status.md 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; ls $OUT
