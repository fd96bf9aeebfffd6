# Next call F (scripts/gpu-next/README.md; issue 41 spike, docs/resnet-fusion.md): cuDNN's ResNet
# fusions (ConvBNfprop, ConvBNwgrad, DgradDreluBNBwdWeight) probed on ResNet-50's layer-1 shapes at
# micro-batch 384, fp16 then bf16. Needs nothing built beforehand and nothing carried; under 3
# minutes (build ~30 s, fp16 at most 100 s, bf16 at most 35 s). OUT is the run tool's.
W=/tmp/resF; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; date -u
engine/native/tools/cudnn_fusion/build.sh $W/bin > $W/build.log 2>&1; echo "build rc=$? at $SECONDS s"; tail -2 $W/build.log
# libcudnn.so.9 loads its engine sub-libraries (and NVRTC for runtime-compiled engines) by name.
export LD_LIBRARY_PATH="$(cat $W/bin/cudnn_lib_dir 2>/dev/null):/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for t in "half 100" "bf16 35"; do
  set -- $t
  timeout $2 $W/bin/cudnn_fusion_probe --dtype $1 --n 384 --iters 20 --warmup 3 --max-plans 3 > $W/probe-$1.md 2> $W/probe-$1.log
  echo "probe $1 rc=$? at $SECONDS s (0: every supported case passed its checks; 1: a check failed; 2: bad setup; 124: timed out)"
  grep -E '^(##|\|)' $W/probe-$1.md | cut -c1-900
  grep -E "proposed|not supported|error|failed|took" $W/probe-$1.log | cut -c1-300 | head -12
done
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
