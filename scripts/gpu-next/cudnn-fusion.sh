# Next call F (scripts/gpu-next/README.md; issue 41 spike, docs/resnet-fusion.md): cuDNN's
# ConvBNfprop fusion probed on ResNet-50's layer-1 shapes at micro-batch 384, fp16 and bf16.
# Needs nothing built beforehand and nothing carried; ~1-2 minutes. OUT is the run tool's.
W=/tmp/resF; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; date -u
engine/native/tools/cudnn_fusion/build.sh $W/bin > $W/build.log 2>&1; echo "build rc=$? at $SECONDS s"; tail -2 $W/build.log
timeout 170 $W/bin/cudnn_fusion_probe --n 384 --iters 30 --warmup 5 --max-plans 3 > $W/probe.md 2> $W/probe.log
echo "probe rc=$? at $SECONDS s (0: every supported case passed its checks; 1: a check failed; 2: bad setup; 124: timeout)"
cut -c1-700 $W/probe.md; grep -E "proposed|not supported|error|failed" $W/probe.log | cut -c1-300 | head -20
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
