# Next call FPROF (scripts/gpu-next/README.md; issue 41 item 1, docs/resnet-fusion.md section 7):
# where resnet.fusion's predicted 4.6 ms went (measured 1.83 ms). The engine built, the native
# suite resnet_fusion, ResNet-50 at 384 fp16 with and without the fusion and bf16 beside
# torchvision compiled, then kernel profiles of the fused and the unfused fp16 runs at 384.
# ~7 min. OUT is the run tool's: gpu-check writes there as it goes. Carry bin, build/gpu, .gloo.
W=/tmp/resFP; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch profile" NATIVE_SUITES="resnet_fusion" TEST_RUN='^TestGPUResNetFusion$' TP_HUNT=0 \
  RESNET_BATCHES="384" RESNET_BATCH_FP16=1 RESNET_BATCH_FUSED=1 \
  PROFILE_MODELS="resnet50-fused resnet50-fp16" PROFILE_RESNET_MB=384 \
  CAP_TESTS=120 BUDGET_S=${FPROF_BUDGET:-520} OUT=$OUT/f scripts/gpu-check.sh > $W/f.log 2>&1; echo "fprof rc=$? at $SECONDS s"
grep -E '^- ' $OUT/f/table.md | cut -c1-300 | head -20
# A block that ran unfused says so on stderr (cuDNN's refusal at once, any fallback at destroy): none expected.
grep -rhE "resnet.fusion: .* (runs|ran) unfused" build/gpu-check/logs 2>/dev/null | sort | uniq -c | head
grep -A19 'Top 15 of engine-' $OUT/f/table.md | cut -c1-200 | head -45
# Per kernel name, fused against unfused fp16: where the milliseconds moved.
python3 bench/reference/profile_diff.py --tgz "$OUT/f/profiles.tgz" resnet50fused-engine-fp16-fused resnet50fp16-engine-fp16 \
  --labels fused,unfused
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/f/logs.tgz; echo "end at $SECONDS s"
