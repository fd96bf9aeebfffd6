# Call LIB (scripts/gpu-next/README.md): which cuDNN the engine's process ran at 7242a59, and
# whether the RUNPATH fix gives GPT/BERT back their ed0acf6 step (issue 41; docs/perf.md
# "Twenty-third session": in one call ed0acf6 ran GPT-2 graphs 32.3 ms and BERT-large 512 71.6 ms,
# 7242a59 33.8 and 76.0, the references unchanged, the native path's GPU losses changed, not
# its CPU losses).
# Before the call, here: rm -rf ab-old && mkdir ab-old && git archive 7242a59 engine/native | tar x -C ab-old
# (ab-old/ is ignored: carry it with bin, build/gpu and .gloo). OUT is the run tool's: each part
# writes there as it goes, so a call cut short still brings back what ran. ~7.5 min.
set -u
W=/tmp/resL; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
{ echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; ldconfig -p | grep -E 'libcudnn\.so|libnccl\.so|libcublas\.so'
  ls -l /usr/lib/x86_64-linux-gnu/ | grep -E 'cudnn|nccl' | head; } > $OUT/system-libs.txt 2>&1
head -20 $OUT/system-libs.txt
# maps LIB: the cuDNN/NCCL/cuBLAS files a process maps after loading LIB before torch (as a worker does).
maps() { python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1]); print(sorted({l.split()[-1] for l in open('/proc/self/maps') if any(k in l for k in ('cudnn.so','nccl.so','cublas'))}))" "$1"; }
# late S: true once fewer than S seconds of the call's ~570 are left (the parts after it are skipped).
late() { ((SECONDS > 570 - $1)) && echo "skipped at $SECONDS s: needs ~$1 s"; }
# 1. The builds: 7242a59's engine with and without the cuDNN link in the background, this tree's
# by gpu-check with the tests (TestGPULibraryCopies, FamilySteps): nothing is timed before all three are done.
oldbuild() { # DIR CMAKE_ARGS...
  local d=$1; shift
  bash scripts/gpu-next/build-tree.sh ab-old/engine/native "$d" 8 "$@" > "$W/$(basename "$d")-build.log" 2>&1
}
oldbuild build/engine-old & b1=$!
oldbuild build/engine-old-nf -DCS_WITH_CUDNN_FUSION=OFF & b2=$!
STAGES="tests" NATIVE_SUITES="kernels" TEST_RUN='^TestGPU(LibraryCopies|FamilySteps)$' JOBS=8 \
  BUDGET_S=200 WORK=$W/work-fixed-t OUT=$OUT/fixed-tests scripts/gpu-check.sh > $W/fixed-tests.log 2>&1; echo "fixed build+tests rc=$? at $SECONDS s"
wait $b1; echo "old build rc=$? at $SECONDS s"; wait $b2; echo "old-nf build rc=$? at $SECONDS s"
grep -hE -- '--- (PASS|FAIL)|gpu_test.go.*(cuDNN|libraries)' $W/work-fixed-t/logs/test-*.out | cut -c1-700 | head -8
for d in build/engine build/engine-old build/engine-old-nf; do
  echo "== $d"; readelf -d $d/libcasestudy_engine.so | grep -E 'RUNPATH|RPATH'; maps $d/libcasestudy_engine.so
done 2>&1 | tee $OUT/maps.txt
# 2. This tree: GPT-2 and BERT-large 512 with the references.
late 130 || { SKIP_BUILD=1 STAGES="gpt bert512" BERT_OFF=res BERT_HF=0 BUDGET_S=150 WORK=$W/work-fixed OUT=$OUT/fixed \
  scripts/gpu-check.sh > $W/fixed.log 2>&1; echo "fixed rc=$? at $SECONDS s"
  grep -E '^\| engine|^\| (nano|fast)-' $OUT/fixed/table.md | cut -d'|' -f2-4; }
# 3. 7242a59's engine: GPT plain, with torch's cuDNN preloaded, and built without the cuDNN link.
WHEEL=$(python3 -c "import glob,os,torch; d=os.path.dirname(torch.__file__); print((glob.glob(d+'/../nvidia/cudnn/lib/libcudnn.so.9')+[''])[0])")
for v in plain preload nf; do
  late 45 && continue
  pre="" lib=$PWD/build/engine-old/libcasestudy_engine.so
  [[ $v == preload && -n $WHEEL ]] && pre="LD_PRELOAD=$WHEEL"
  [[ $v == nf ]] && lib=$PWD/build/engine-old-nf/libcasestudy_engine.so
  env $pre ENGINE_LIB=$lib STAGES="gpt" BUDGET_S=45 WORK=$W/work-old-$v OUT=$OUT/old-$v \
    scripts/gpu-check.sh > $W/old-$v.log 2>&1; echo "old-$v rc=$? at $SECONDS s"
  grep -E '^\| engine|^\| (nano|fast)-' $OUT/old-$v/table.md | cut -d'|' -f2-4
done
rm -rf $W/work-*/profiles; tar czf $OUT/logs.tgz -C $W . ; echo "end at $SECONDS s"
