#!/usr/bin/env bash
# predict-validate.sh: the CPU Gloo validation of the multi-GPU prediction
# (issue 40, docs/predict.md). In ROUNDS interleaved rounds, for N in $RANKS
# (default "2 4"), it benchmarks Gloo's all-reduce on N ranks (alone, and
# beside one busy compute thread per rank: --beside 1), measures the
# one-rank inputs of studies/gpt/predict-cpu.yaml (run --predict N: a world of
# one with the reducer on) as N copies at once, sharing this host as the N
# ranks will, and then measures the study on N ranks, one launch per trial
# each time, so that a busy host's load falls alike on both. It predicts the
# study on N ranks from every input launch (pooled, medians;
# --concurrent-inputs) and compares with every N-rank launch: the median
# absolute error of the step time and whether the predicted best trial is the
# measured best. Run it on a quiet machine.
#
#   scripts/predict-validate.sh [OUT]    (default OUT: results/predict-validate)
#
# Needs bin/casestudy and the engine (make cli engine). Prints a Markdown
# summary (docs/predict.md has the committed one) and writes OUT/summary.md.
# Exit 1 when a median error is above 10% or the best trial differs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/predict-validate}
RANKS=${RANKS:-2 4}
ROUNDS=${ROUNDS:-3}
BIN=${BIN:-bin/casestudy}
STUDY=studies/gpt/predict-cpu.yaml
SIZES=${SIZES:-16K,256K,1M,4M,16M}
[[ -x $BIN ]] || { echo "predict-validate.sh: no $BIN (make cli)" >&2; exit 3; }
command -v jq >/dev/null || { echo "predict-validate.sh: needs jq" >&2; exit 3; }
rm -rf "$OUT" && mkdir -p "$OUT"

for r in $(seq "$ROUNDS"); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  for n in $RANKS; do
    # The collectives' fit: a benchmark each round, all rounds' points in one fit.
    "$BIN" bench allreduce --device cpu --ranks "$n" --sizes "$SIZES" --iters 10 --warmup 2 --json >"$OUT/bench$n-$r.json"
    # The collectives beside compute: each rank with one busy thread (the
    # study's threads per rank) sharing its CPU with Gloo, as a rank's
    # backward does with the collectives it overlaps (predict --fit-beside).
    "$BIN" bench allreduce --device cpu --ranks "$n" --sizes "$SIZES" --iters 10 --warmup 2 --beside 1 --json >"$OUT/beside$n-$r.json"
    # The one-rank inputs: N copies at once, each a world of one, sharing the
    # host as the N ranks will (predict --concurrent-inputs).
    pids=()
    for k in $(seq "$n"); do
      "$BIN" run "$STUDY" --out "$OUT/one$n" --run-id "one$n-$r-$k" --repeats 1 --predict "$n" --fit "$OUT/bench$n-$r.json" \
        >"$OUT/one$n-$r-$k.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    "$BIN" run "$STUDY" --out "$OUT/r$n" --run-id "r$n-$r" --ranks "$n" --repeats 1 >"$OUT/r$n-$r.log" 2>&1
  done
  echo "round $r done (load at its start $load)" >&2
done
status=0
{
  echo "| ranks | trial | predicted | measured | error | in band |"
  echo "|---|---|---|---|---|---|"
} >"$OUT/table.md"
: >"$OUT/summary.md"
for n in $RANKS; do
  against=$(printf "$OUT/r$n/gpt-predict-cpu/r$n-%s," $(seq "$ROUNDS"))
  fits=$(printf "$OUT/bench$n-%s.json," $(seq "$ROUNDS"))
  besides=$(printf "$OUT/beside$n-%s.json," $(seq "$ROUNDS"))
  "$BIN" predict "$OUT/one$n/gpt-predict-cpu"/one* --gpus "$n" --fit "${fits%,}" --fit-beside "${besides%,}" --against "${against%,}" \
    --concurrent-inputs --out "$OUT" --json >"$OUT/predicted$n.json"
  jq -r --arg n "$n" '.validation.checks[] | "| \($n) | \(.changed) | \(.predicted_step_ms*100|round/100) ms | \(.measured_step_ms*100|round/100) ms | \(.error*1000|round/10)% | \(.in_band) |"' \
    "$OUT/predicted$n.json" >>"$OUT/table.md"
  jq -r --arg n "$n" '.validation | "\($n) ranks: median |error| \(.median_abs_error*1000|round/10)%, best predicted \(.predicted_best), measured \(.measured_best) (\(if .same_best then "same" else "different" end))"' \
    "$OUT/predicted$n.json" >>"$OUT/summary.md"
  jq -e '.validation.median_abs_error <= 0.10 and .validation.same_best' "$OUT/predicted$n.json" >/dev/null || status=1
done
cat "$OUT/table.md" && echo && cat "$OUT/summary.md"
echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD 2>/dev/null)"
exit $status
