# Call 5 (2026-12-07 17:36 UTC, same machine): every Go GPU test and native suite on the build
# of call 2 (gpu-check's tests stage). Its 420 s budget ran out in the Go tests
# (TestGPUTPStagedZero's fp16 case: "panic: test timed out after 3m35s", exit 2): a time limit,
# not a failure; call 6 ran the tests it did not reach. As run (one line).
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0 CS_GLOO_INCLUDE=$PWD/.gloo/include; W=/tmp/resT; mkdir -p $W; SKIP_BUILD=1 STAGES="tests" JOBS=16 BUDGET_S=420 WORK=$W/t OUT=$OUT/tests scripts/gpu-check.sh > $W/t.log 2>&1; echo "tests rc=$? at $SECONDS"; grep -hE -- '^(--- FAIL|ok|FAIL|PASS)|^--- PASS: TestGPU' $W/t/logs/test-*.out | cut -c1-200 | head -60; grep -E 'suite|FAIL|skipped' $OUT/tests/table.md | head -30; tar czf $OUT/logs.tgz -C $W t.log
