W=/tmp/res; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,driver_version --format=csv,noheader
CS_GLOO_INCLUDE=$PWD/.gloo/include cmake -S engine/native -B build/engine -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS=90 > $W/build.log 2>&1 && cmake --build build/engine -j 16 --target casestudy_engine >> $W/build.log 2>&1 && echo "build ok $SECONDS s" || { echo "build FAIL"; grep -E "error|undefined" $W/build.log | head; }
SKIP_BUILD=1 STAGES="aa" BUDGET_S=300 OUT=$W/aa scripts/gpu-check.sh > $W/aa.log 2>&1; echo "aa rc=$? at $SECONDS s"; cat $W/aa/windows.md 2>/dev/null | head -20; tail -5 $W/aa.log
mkdir -p $W/rh; OUT=$W/rh BUDGET_S=$((560-SECONDS)) CAP_STUDY=90 STUDIES="studies/gpt/ddp2-quick.yaml studies/bert/ddp2-quick.yaml studies/resnet50/ddp2-quick.yaml studies/gpt/ddp4-quick.yaml studies/gpt/multinode.yaml studies/gpt/ddp.yaml" scripts/gpu-rehearse.sh > $W/rehearse.log 2>&1; echo "rehearse rc=$? at $SECONDS s"; grep -E "^## |ran|checksum|loss|exit" $W/rh/rehearse.md | head -40
tar czf $OUT/all.tgz -C $W . ; ls $OUT
