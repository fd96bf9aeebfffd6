# Call LIB (scripts/gpu-next/README.md): which cuDNN the engine's process ran at 7242a59, and
# whether the RUNPATH fix gives GPT/BERT back their ed0acf6 step (issue 41; docs/perf.md
# "Twenty-third session": in one call ed0acf6 ran GPT-2 graphs 32.3 ms and BERT-large 512 71.6 ms,
# 7242a59 33.8 and 76.0, the references unchanged, the native path's GPU losses changed, not
# its CPU losses).
# Before the call, here: rm -rf ab-old && mkdir ab-old && git archive 7242a59 engine/native | tar x -C ab-old
# (ab-old/ is ignored: carry it with bin, build/gpu and .gloo). OUT is the run tool's.
set -u
W=/tmp/resL; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
{ echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ldconfig -p | grep -E 'libcudnn\.so|libnccl\.so|libcublas\.so'
  ls -l /usr/lib/x86_64-linux-gnu/ | grep -E 'cudnn|nccl' | head; } > $W/system-libs.txt 2>&1
cat $W/system-libs.txt | head -20
# maps LIB: the cuDNN/NCCL/cuBLAS files a process maps after loading LIB before torch (as a worker does).
maps() { python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1]); print(sorted({l.split()[-1] for l in open('/proc/self/maps') if any(k in l for k in ('cudnn.so','nccl.so','cublas'))}))" "$1"; }
# 1. This tree (the RUNPATH without system directories): build, TestGPULibraryCopies, GPT and BERT.
STAGES="tests gpt bert512" NATIVE_SUITES="kernels" TEST_RUN='^TestGPU(LibraryCopies|FamilySteps)$' BERT_OFF=res BERT_HF=0 \
  BUDGET_S=300 WORK=$W/work-fixed OUT=$W/fixed scripts/gpu-check.sh > $W/fixed.log 2>&1; echo "fixed rc=$? at $SECONDS s"
grep -hE -- '--- (PASS|FAIL)|gpu_test.go.*(cuDNN|libraries)' $W/work-fixed/logs/test-*.out | cut -c1-600 | head -8
readelf -d build/engine/libcasestudy_engine.so | grep -E 'RUNPATH|RPATH'; maps build/engine/libcasestudy_engine.so
grep -E '^\| engine|^\| (nano|fast)-' $W/fixed/table.md | cut -d'|' -f2-4
# 2. 7242a59's engine: its RUNPATH and maps, then GPT plain and with torch's cuDNN preloaded.
cmake -S ab-old/engine/native -B build/engine-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS=90 > $W/old-cmake.log 2>&1 &&
  cmake --build build/engine-old -j 16 --target casestudy_engine > $W/old-build.log 2>&1; echo "old build rc=$? at $SECONDS s"
readelf -d build/engine-old/libcasestudy_engine.so | grep -E 'RUNPATH|RPATH'; maps build/engine-old/libcasestudy_engine.so
WHEEL=$(python3 -c "import glob,os,torch; d=os.path.dirname(torch.__file__); print((glob.glob(d+'/../nvidia/cudnn/lib/libcudnn.so.9')+[''])[0])")
for v in plain preload; do
  pre=""; [[ $v == preload && -n $WHEEL ]] && pre="LD_PRELOAD=$WHEEL"
  env $pre ENGINE_LIB=$PWD/build/engine-old/libcasestudy_engine.so STAGES="gpt" \
    BUDGET_S=70 WORK=$W/work-old-$v OUT=$W/old-$v scripts/gpu-check.sh > $W/old-$v.log 2>&1; echo "old-$v rc=$? at $SECONDS s"
  grep -E '^\| engine|^\| (nano|fast)-' $W/old-$v/table.md | cut -d'|' -f2-4
done
# 3. 7242a59's engine without the cuDNN link (-DCS_WITH_CUDNN_FUSION=OFF, as ed0acf6 linked): the link or the code.
cmake -S ab-old/engine/native -B build/engine-old-nf -G Ninja -DCMAKE_BUILD_TYPE=Release -DCS_CUDA_ARCHS=90 \
  -DCS_WITH_CUDNN_FUSION=OFF > $W/oldnf-cmake.log 2>&1 &&
  cmake --build build/engine-old-nf -j 16 --target casestudy_engine > $W/oldnf-build.log 2>&1; echo "old-nf build rc=$? at $SECONDS s"
maps build/engine-old-nf/libcasestudy_engine.so
ENGINE_LIB=$PWD/build/engine-old-nf/libcasestudy_engine.so STAGES="gpt" BUDGET_S=70 WORK=$W/work-old-nf OUT=$W/old-nf \
  scripts/gpu-check.sh > $W/old-nf.log 2>&1; echo "old-nf rc=$? at $SECONDS s"
grep -E '^\| engine|^\| (nano|fast)-' $W/old-nf/table.md | cut -d'|' -f2-4
rm -rf $W/work-*/profiles; tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
