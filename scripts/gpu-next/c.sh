# Next call C (scripts/gpu-next/README.md): issue 40 (a) on the host's 16 cores. OUT is the run tool's.
W=/tmp/resC; rm -rf $W; mkdir -p $W
nproc; cat build/gpu/COMMIT; date -u
SKIP_BUILD=1 STAGES="predict-cpu" BUDGET_S=570 OUT=$W/c scripts/gpu-check.sh > $W/c.log 2>&1; echo "predict-cpu rc=$? at $SECONDS s"
grep -E '^- ' $W/c/table.md | cut -c1-600; head -c 6000 $W/c/predict-cpu.md
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
