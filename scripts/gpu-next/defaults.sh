# Call DEFAULTS (run 2026-12-07h call 2 with STAGES="tests" only: results/reference/gpu-check-2026-12-07h/README.md): on an H100, the engine with its default
# kernels since the twenty-fourth session (lny off): the GELU backward probe first (~15 s:
# engine/native/tools/kernel_probe, docs/perf.md "Twenty-fourth session"), then the suites of
# the kernels GPT and BERT use and their Go GPU tests (every family, graphs against eager, bf16
# against fp32, the world-of-one paths), GPT-2 and BERT-large 32 x 512 (with lny beside the
# default) against their compiled references, and ResNet-50 at 384 bf16 and fp16 fused beside
# torchvision compiled: its 6,915 img/s (2026-12-07f) most likely ran on the system's cuDNN
# 9.14, as every engine-first run before 58a5cfc did (docs/resnet-fusion.md section 7). (All the tests at once took over 420 s on
# 2026-12-07g: STAGES="tests" alone, as there.) ~9 min with the build. OUT is the run tool's. Carry bin,
# build/gpu, .gloo.
W=/tmp/resDef; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
{ engine/native/tools/kernel_probe/build.sh $W/kp && $W/kp/gelu_bwd_probe; } 2>&1 | tee $OUT/gelu-probe.txt
STAGES="tests gpt bert512 resnet50-batch" RESNET_BATCHES=384 RESNET_BATCH_FP16=1 RESNET_BATCH_FUSED=1 NATIVE_SUITES="add_layer_norm:ln linear_act:lin linear_qkv:qkv kernels adamw:adam adamc:adamc linear_casts:cast" \
  TEST_RUN='^TestGPU(BF16TracksFP32|FamilyGraphsMatchEager|FamilySteps|LibraryCopies|GraphsMatchEager|WorldOfOnePaths)$' CAP_TESTS=150 \
  BERT_OFF=res BERT_ON=lny BERT_HF=0 TP_HUNT=0 \
  BUDGET_S=$((560 - SECONDS)) OUT=$OUT/d scripts/gpu-check.sh > $W/d.log 2>&1; echo "defaults rc=$? at $SECONDS s"
grep -E '^- |^\| (engine|nano|fast)' $OUT/d/table.md | cut -c1-260 | head -40
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
rm -rf $W/kp; tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/d/logs.tgz; echo "end at $SECONDS s"
