# Call WGRAD (scripts/gpu-next/README.md; issue 41 item 1, docs/resnet-fusion.md section 9): conv3's
# weight gradient through cuDNN's ConvBNwgrad (bn2's scale-bias-ReLU recomputed inside it) and
# bn2's backward recomputing its ReLU mask from y2 (bn_act_bwd_remask): bn2's apply pass gone
# from the backward. The engine built (a fresh machine: 75-134 s), `cs_native_tests resnet_fusion
# bn_relu` (the blocks with ConvBNwgrad on and off against float64, the remask kernel equal to the
# apply's mask bit for bit at bn2's shapes, the model with it on) and TestGPUResNetFusion (the
# default, off); then ResNet-50 at 384 x 224² with graphs: bf16 (the default), fp16 fused
# (ConvBNwgrad off, the default until this call), then the fused run with it on, off, on (in
# turn, against the power limiter's drift), beside torchvision compiled (padded stem). If on is
# faster and every test passed, the next commit makes it the default (and TestGPUResNetFusion
# should then run again with it on). Predicted before the run (section 9): on 0.8-1.2 ms a step under off (~54.3 ms,
# ~7,050 img/s where off gives ~55.4). OUT is the run tool's. Carry build/gpu-carry.tar.xz.
W=/tmp/resWG; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch" NATIVE_SUITES="resnet_fusion bn_relu" TEST_RUN='^TestGPUResNetFusion$' TP_HUNT=0 \
  RESNET_BATCHES="384" RESNET_BATCH_FUSED=1 RESNET_BATCH_FUSED_WGRAD="on off on" \
  CAP_TESTS=150 BUDGET_S=${WG_BUDGET:-540} OUT=$OUT/w scripts/gpu-check.sh > $W/w.log 2>&1; echo "wgrad rc=$? at $SECONDS s"
grep -E '^- |^\| (engine|tv)' $OUT/w/table.md | cut -c1-260 | head -40
grep -rhE "remask|ConvBNwgrad|weight gradient|  plan " build/gpu-check/logs 2>/dev/null | cut -c1-300 | head -40
grep -rhE "resnet.fusion: .*(unfused)" build/gpu-check/logs 2>/dev/null | sort | uniq -c | cut -c1-300 | head -20
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/w/logs.tgz; echo "end at $SECONDS s"
