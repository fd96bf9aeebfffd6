#!/usr/bin/env bash
# sched-sample.sh OUT [PERIOD]: until killed, every PERIOD seconds (0.25),
# one line per thread of every running `casestudy worker` process (the ranks
# and one-rank copies the runner starts) into OUT:
#   TIME PID TID RUN_NS WAIT_NS
# RUN_NS and WAIT_NS are the thread's cumulative time on a CPU and waiting on
# a run queue, runnable but not running (/proc/PID/task/TID/schedstat).
# scripts/predict-validate.sh (SCHED=1) runs it beside each command and
# scripts/predict-decompose.py sums it per process: whether a rank's compute
# thread waited for a CPU, and how much CPU its other threads (Gloo's) took
# (docs/predict.md, "Where the step goes").
set -uo pipefail
out=${1:?usage: sched-sample.sh OUT [PERIOD]}
period=${2:-0.25}
: >"$out"
while true; do
  t=$(date +%s.%N)
  for p in $(pgrep -f '^[^ ]*casestudy worker' 2>/dev/null); do
    for d in /proc/"$p"/task/*; do
      { read -r run wait _ <"$d/schedstat"; } 2>/dev/null || continue
      echo "$t $p ${d##*/} $run $wait"
    done
  done >>"$out"
  sleep "$period"
done
