# Next call B, on the machine call A built on (scripts/gpu-next/README.md). OUT is the run tool's.
W=/tmp/resB; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
SKIP_BUILD=1 STAGES="predict" BUDGET_S=300 OUT=$W/p scripts/gpu-check.sh > $W/p.log 2>&1; echo "predict rc=$? at $SECONDS s"
grep -E '^- ' $W/p/table.md | cut -c1-400 | head -10; head -c 2500 $W/p/predict-rehearsal.md; echo; head -c 2000 $W/p/predict.md
tar czf $OUT/all.tgz -C $W .
OUT=$W/rh LAUNCH_S=20 BUDGET_S=$((570-SECONDS)) STUDIES="studies/gpt/tp.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"
grep -E '^## |^plan|checksums|\*\*losses|\*\*memory|refused|skipped|DISAGREE|NOT CHECKED' $W/rh/rehearse.md | cut -c1-300 | head -30
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
