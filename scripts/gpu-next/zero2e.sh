# Calls ZERO2 and E in one (scripts/gpu-next/README.md): ZeRO-2's gradient memory (issue 39, zero2.sh),
# then the predict stage with the staged bench's points interpolated (issue 40 (b), e.sh) on the
# same build. OUT is the run tool's. Carry bin, build/gpu and .gloo.
set -u
Z2_BUDGET=${Z2_BUDGET:-300} bash scripts/gpu-next/zero2.sh; mv $OUT/all.tgz $OUT/zero2.tgz
E_BUDGET=${E_BUDGET:-270} bash scripts/gpu-next/e.sh; mv $OUT/all.tgz $OUT/e.tgz
cd $OUT && tar cf all.tar zero2.tgz e.tgz && rm zero2.tgz e.tgz; echo "zero2e end at $SECONDS s"
