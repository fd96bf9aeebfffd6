# Call H200 (scripts/gpu-next/README.md; issue 41: "the H200 figure beside it"): on an H200
# (run's kind nvidia-h200), the engine of this tree with its default kernels (lny off since
# the twenty-fourth session) against the compiled references: ResNet-50 at 384 in bf16 and in
# fp16 with resnet.fusion cudnn, each beside torchvision compiled with the padded stem; GPT-2
# 124M; BERT-large 32 x 512 with and without lny. The fused path's GPU test first (cuDNN's
# fused kernels on another card). ~8 min with the build. OUT is the run tool's. Carry bin,
# build/gpu, .gloo.
W=/tmp/resH200; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || echo "h200.sh: not an H200: the figures below are of this card, not the H200's"
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests resnet50-batch gpt bert512" NATIVE_SUITES="resnet_fusion kernels" TEST_RUN='^TestGPU(ResNetFusion|LibraryCopies)$' TP_HUNT=0 \
  RESNET_BATCHES="384" RESNET_BATCH_FP16=1 RESNET_BATCH_FUSED=1 BERT_OFF=res BERT_ON=lny BERT_HF=0 \
  CAP_TESTS=120 BUDGET_S=${H200_BUDGET:-540} OUT=$OUT/h scripts/gpu-check.sh > $W/h.log 2>&1; echo "h200 rc=$? at $SECONDS s"
grep -E '^- |^\| (engine|nano|fast|tv|resnet|gpt|bert)' $OUT/h/table.md | cut -c1-260 | head -50
grep -rhE "resnet.fusion: .* (runs|ran) unfused" build/gpu-check/logs 2>/dev/null | sort | uniq -c | head
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/h/logs.tgz; echo "end at $SECONDS s"
