# Twentieth session, call B (warm machine, engine built by call A): precision fp8 against bf16 at
# GPT-2 350M and 774M and BERT-large 128/512 with the nanoGPT-style references (issue 41), then the
# predict stage (issue 40: κ on the GPU, the one-GPU rehearsal predicted and measured). OUT is the run tool's.
W=/tmp/resB; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
SKIP_BUILD=1 STAGES="fp8" FP8_SIZES="350m 774m" FP8_SCALINGS="tensor" FP8_REF=1 FP8_BERT=1 BUDGET_S=${B1:-290} OUT=$W/f scripts/gpu-check.sh > $W/f.log 2>&1; echo "fp8 rc=$? at $SECONDS s"
grep -E '^- ' $W/f/table.md | cut -c1-400 | head -20
tar czf $OUT/all.tgz -C $W .
SKIP_BUILD=1 STAGES="predict" BUDGET_S=$((575-SECONDS)) OUT=$W/p scripts/gpu-check.sh > $W/p.log 2>&1; echo "predict rc=$? at $SECONDS s"
grep -E '^- ' $W/p/table.md | cut -c1-400 | head -10; head -c 3000 $W/p/predict-rehearsal.md 2>/dev/null; echo; head -c 2500 $W/p/predict.md 2>/dev/null
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
