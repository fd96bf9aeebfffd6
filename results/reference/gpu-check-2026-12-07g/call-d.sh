# Next call D (scripts/gpu-next/README.md): issue 40 (a), the 2-rank miss on the host's cores
# (docs/predict.md "The collectives' tail"): the same stage at 2 ranks twice, 4 cores a rank
# (room for each rank's compute thread and its three communication threads) and 2 (the
# control, as call C), each 8 rounds x 2 launches. OUT is the run tool's.
W=/tmp/resD; rm -rf $W; mkdir -p $W
nproc; cat build/gpu/COMMIT; date -u
# The scheduler the stalls depend on (debugfs may be absent: then only the kernel and autogroup).
{ uname -r; echo "autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)"
  for f in base_slice_ns min_granularity_ns wakeup_granularity_ns latency_ns; do
    [[ -r /sys/kernel/debug/sched/$f ]] && echo "$f $(cat /sys/kernel/debug/sched/$f)"; done
  grep -o 'CONFIG_HZ=[0-9]*' /boot/config-"$(uname -r)" 2>/dev/null; } | tee $W/sched.txt
# D_RANKS=4 D_CORES=3: 4 ranks with room for their threads (12 of cores 1-15; twenty-third session).
for c in ${D_CORES:-4 2}; do # D_CORES=4: the 4-core half only (call C at ed0acf6 was the 2-core control)
  CORES_PER_RANK=$c PREDICT_CPU_RANKS=${D_RANKS:-2} PREDICT_CPU_ROUNDS=8 EST_PREDICT_CPU=200 CAP_PREDICT_CPU=215 \
    SKIP_BUILD=1 STAGES="predict-cpu" BUDGET_S=250 OUT=$W/c$c scripts/gpu-check.sh > $W/c$c.log 2>&1
  echo "== $c cores a rank: predict-cpu rc=$? at $SECONDS s"
  grep -E '^- ' $W/c$c/table.md | cut -c1-400
  sed -n '/^| ranks | trial/,/^verdict/p' $W/c$c/predict-cpu.md | cut -c1-300
  sed -n '/^Each process.s thread/,/^Stalls by bucket/p' $W/c$c/predict-cpu.md | grep -E '^- |1056768|1057280|1058304|5551104' | cut -c1-200
  sed -n '/^Stalls by where/,$p' $W/c$c/predict-cpu.md | grep '^- ' | cut -c1-200
done
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
