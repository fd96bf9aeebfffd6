# Call B, chained on the warm machine: fp8-diag (issue 41) then predict-cpu (issue 40, the stretch
# calibration, on this machine's 16 cores). OUT is the run tool's.
W=/tmp/res25; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
SKIP_BUILD=1 STAGES="fp8-diag" BUDGET_S=${B1:-300} OUT=$W/f scripts/gpu-check.sh > $W/f.log 2>&1; echo "fp8-diag rc=$? at $SECONDS s"
head -c 5000 $W/f/fp8-diag.md 2>/dev/null; echo
tar czf $OUT/all.tgz -C $W . 
SKIP_BUILD=1 STAGES="predict-cpu" PREDICT_CPU_ROUNDS=4 EST_PREDICT_CPU=150 CAP_PREDICT_CPU=300 BUDGET_S=$((575-SECONDS)) OUT=$W/p scripts/gpu-check.sh > $W/p.log 2>&1; echo "predict-cpu rc=$? at $SECONDS s"
grep -E '^- ' $W/p/table.md | cut -c1-600; head -c 4000 $W/p/predict-cpu.md 2>/dev/null
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
