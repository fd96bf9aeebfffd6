W=/tmp/res; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader
STAGES="tests" BUDGET_S=290 OUT=$W/chk scripts/gpu-check.sh > $W/chk.log 2>&1; echo "check rc=$? at $SECONDS s"
grep -E '^- ' $W/chk/table.md | head -40
grep -hE -- '--- FAIL|^FAIL|panic' $W/chk/logs/test-*.out 2>/dev/null | head -20
mkdir -p $W/rh; OUT=$W/rh BUDGET_S=$((420-SECONDS)) STUDIES="studies/gpt/pipeline.yaml studies/bert/zero.yaml studies/bert/ddp4-quick.yaml studies/resnet50/ddp4-quick.yaml studies/gpt/ddp8-quick.yaml studies/resnet50/ddp8-quick.yaml studies/bert/ddp8-quick.yaml studies/gpt/multinode.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"
grep -E '^## |checksums|losses|skipped|refused' $W/rh/rehearse.md | cut -c1-260 | head -60
tail -5 $W/rehearse.log
tar czf $OUT/all.tgz -C $W . ; ls $OUT
