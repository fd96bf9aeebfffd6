# Call C, chained on the warm machine: the 200-step loss curves with fp8 (issue 41), then the
# rehearsal of studies/gpt/tppp.yaml (issue 39). OUT is the run tool's.
W=/tmp/resC; rm -rf $W; mkdir -p $W; export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0; [[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include; nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT; date -u
SKIP_BUILD=1 STAGES="losscurve" LOSS_FP8=1 LOSS_SEEDS="1 2 3" BUDGET_S=215 OUT=$W/l scripts/gpu-check.sh > $W/l.log 2>&1; echo "losscurve rc=$? at $SECONDS s"; grep -E '^- ' $W/l/table.md | cut -c1-600; tail -4 build/gpu-check/logs/losscurve*.txt 2>/dev/null | cut -c1-400
mkdir -p $W/llogs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/llogs/ 2>/dev/null; cp -r $W/l $W/lout 2>/dev/null; tar czf $OUT/all.tgz -C $W .
OUT=$W/rh LAUNCH_S=20 BUDGET_S=$((440-SECONDS)) STUDIES="studies/gpt/tppp.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"; grep -E '^## |^- studies|checksums|\*\*losses|refused|skipped|DISAGREE' $W/rh/rehearse.md | cut -c1-300 | head -20; tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
