# Call WINNER (scripts/gpu-next/README.md; issue 40 (a)'s winner half): studies/gpt/predict-cpu-winner.yaml
# (three trials whose best the earlier runs separated: 25 MiB buckets best at 4 ranks, 0.05
# MiB at 2, 0.05 MiB with overlap off slower at both) predicted and measured at 2 and 4 CPU
# Gloo ranks in one run of scripts/predict-validate.sh, pinned: 2 ranks on 4 cores a rank (8 of
# cores 1-15), 4 ranks on 3 (12), as many of 8 rounds x 2 launches a trial as fit. The bar: median
# |error| <= 10% at each N, and the predicted best the measured best where the measurement
# separates it (predict-validate.sh's exit 0 met, 1 not met, 4 a winner not separated: the stage's
# status line in table.md names which; gpu-check's own exit is 1 for both of the last two).
# Engine built on this machine by an earlier call (SKIP_BUILD=1) unless WINNER_BUILD=1: then 150 s
# for the build (75-134 s on a fresh machine, 2026-12-07h) go into the budget and the stage's
# WINNER_S defaults to 360 s, not 500, so that the call ends within the device's 600 s (call 4
# of 2026-12-07h left the build out of the budget and ran no round). WINNER_STUDY: another study
# of the same kind (studies/gpt/predict-cpu-winner16.yaml: 16 tokens, its trials further apart at
# 2 ranks). OUT is the run tool's. Carry bin, build/gpu, .gloo.
W=/tmp/resW; rm -rf $W; mkdir -p $W
nproc; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
{ uname -r; echo "autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)"; } | tee $W/sched.txt
skip=1 build_s=0; [[ ${WINNER_BUILD:-0} == 1 ]] && skip=0 build_s=150
S=${WINNER_S:-$((skip ? 500 : 360))}
CORES_PER_RANK="2:4 4:3" PREDICT_CPU_RANKS="2 4" PREDICT_CPU_STUDY=${WINNER_STUDY:-studies/gpt/predict-cpu-winner.yaml} PREDICT_CPU_ROUNDS=8 \
  EST_PREDICT_CPU=$((S - 20)) CAP_PREDICT_CPU=$S SKIP_BUILD=$skip STAGES="predict-cpu" \
  BUDGET_S=$((S + 40 + build_s)) OUT=$W/w scripts/gpu-check.sh > $W/w.log 2>&1
echo "== winner: gpu-check rc=$? at $SECONDS s (the verdict: the predict-cpu line below)"
grep -E '^- ' $W/w/table.md | cut -c1-400
sed -n '/^| ranks | trial/,/^verdict/p' $W/w/predict-cpu.md | cut -c1-300
grep -E '^caveat' $W/w/predict-cpu.md
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
