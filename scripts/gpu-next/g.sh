# Next call G (scripts/gpu-next/README.md; issue 41 item 1, docs/resnet-fusion.md section 6):
# resnet.fusion cudnn, the bottleneck blocks' batch norms in cuDNN's ConvBNfprop (fp16). The engine
# built (with cuDNN's backend headers from torch's wheel: CMake says "cuDNN fusion"), the native
# suites resnet_fusion (fused block against unfused fp16 and float64, ResNet-50 tiny's losses) and
# bn_relu, the Go test TestGPUResNetFusion (eager against CUDA graphs, bf16 refused); ResNet-50 at
# 384 in bf16, fp16 and fp16 fused with graphs beside torchvision compiled; a kernel profile of the
# fused run at 384. Under 9 minutes. OUT is the run tool's.
W=/tmp/resG; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch profile" NATIVE_SUITES="resnet_fusion bn_relu:bn" TP_HUNT=0 \
  TEST_RUN='^TestGPUResNetFusion$' RESNET_BATCHES="384" RESNET_BATCH_FP16=1 RESNET_BATCH_FUSED=1 \
  PROFILE_MODELS=resnet50-fused PROFILE_RESNET_MB=384 \
  CAP_TESTS=150 BUDGET_S=500 OUT=$W/g scripts/gpu-check.sh > $W/g.log 2>&1; echo "g rc=$? at $SECONDS s"
grep -hE "cuDNN fusion|cuDNN 9 backend" build/gpu-check/logs/cmake*.out 2>/dev/null | head -3
grep -E '^- ' $W/g/table.md | cut -c1-300 | head -30
grep -E "^(ok|FAIL)|fused block|tiny step|plan |refusals" build/gpu-check/logs/native-tests-resnet_fusion.out 2>/dev/null | cut -c1-200 | head -40
cat build/gpu-check/logs/native-tests-resnet_fusion.err 2>/dev/null | head -20
grep -hE -- '^\s*--- (FAIL|PASS)|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
# A block cuDNN refused runs unfused and says so once: none expected.
grep -rhE "resnet.fusion: .* (runs|ran) unfused" build/gpu-check/logs 2>/dev/null | sort | uniq -c | head
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
