# Call FUSETUNE (scripts/gpu-next/README.md; issue 41 item 1): the fused ResNet path's cuDNN plans
# autotuned (each fused graph's fastest of up to cudnn.benchmark_limit's count of the heuristic's
# plans, timed with CUDA events when the block is first met; docs/resnet-fusion.md section 8).
# The engine built (a fresh machine: 75-134 s), `cs_native_tests resnet_fusion` (the blocks and
# the model now with tuned plans, a tuned 3x3 with its prologue against float64, the variable's
# refusal) and TestGPUResNetFusion; then ResNet-50 at 384 x 224² with graphs: bf16 (the default),
# fp16 fused with tuned plans, and the arms first (the heuristic's first plan, as before), lim0
# (every plan and every convolution algorithm timed), first again and tuned again (the order
# against the power limiter's drift), beside torchvision compiled (padded stem). Predicted before
# (docs/resnet-fusion.md section 8): tuned 0 to 0.7 ms a step under first (~6,820-6,900 img/s
# on a card where first gives ~6,817), lim0 within 0.3 ms of tuned. OUT is the run tool's.
# Carry bin, build/gpu, .gloo.
W=/tmp/resFT; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch" NATIVE_SUITES="resnet_fusion" TEST_RUN='^TestGPUResNetFusion$' TP_HUNT=0 \
  RESNET_BATCHES="384" RESNET_BATCH_FUSED=1 RESNET_BATCH_FUSED_ARMS="first lim0 first tuned" \
  CAP_TESTS=150 BUDGET_S=${FT_BUDGET:-540} OUT=$OUT/f scripts/gpu-check.sh > $W/f.log 2>&1; echo "fusetune rc=$? at $SECONDS s"
grep -E '^- |^\| (engine|tv|resnet)' $OUT/f/table.md | cut -c1-260 | head -40
grep -rhE "resnet_fusion|tuned 3x3|bad plan|  plan " build/gpu-check/logs 2>/dev/null | cut -c1-300 | head -30
grep -rhE "resnet.fusion: .*(in place of|unfused)" build/gpu-check/logs 2>/dev/null | sort | uniq -c | cut -c1-300 | head -40
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/f/logs.tgz; echo "end at $SECONDS s"
