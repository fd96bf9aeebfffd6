#!/usr/bin/env bash
# gpu-launch-cost.sh: run studies end to end with the CLI on the GPU machine and
# show where their time went (issue 16: launch timelines, measured share, warm-up
# settle steps, the overlap A/A). From the repository root, after `make cli` on
# the CPU machine (carry bin); the engine is built here when ENGINE_LIB is
# missing (scripts/gpu-check.sh's build stage).
#
#   scripts/gpu-launch-cost.sh                         # the three headline studies
#   STUDIES=studies/bert/overlap-aa.yaml RUN_FLAGS="--overlap aa-tail" scripts/gpu-launch-cost.sh
#
# For each study, in order: `casestudy plan` (with its time estimate when an
# earlier run is under $WORK/results), `casestudy run` if its estimate fits in
# what is left of BUDGET_S (under a timeout of what is left: a study cut short
# records what finished, as after Ctrl-C), then `casestudy timeline`. $OUT gets
# per study timeline-<name>.txt, report-<name>.md and run-<name>.tgz (the run
# directory without logs; logs in logs-<name>.tgz), and summary.txt with every
# timeline. Estimates (s, one H200, the studies as shipped: repeats auto,
# from the runs of 2026-12-02/03): gpt 240, bert 240, resnet50 280,
# bert-overlap-aa 60, gpt-overlap-aa 90; EST_<name> overrides one (dashes as underscores),
# EST_SCALE (percent) all.
#
# Environment: STUDIES (default the three headline studies), RUN_FLAGS (extra
# `casestudy run` flags), OUT (build/gpu-out), WORK (build/gpu-launch-cost),
# BUDGET_S (570), ENGINE_LIB (build/engine/libcasestudy_engine.so), EST_SCALE
# (100). Exit status: 0 when every study ran to its end, 1 otherwise.
set -uo pipefail
SECONDS=0
STUDIES=${STUDIES:-studies/gpt.yaml studies/bert.yaml studies/resnet50.yaml}
RUN_FLAGS=${RUN_FLAGS:-}
OUT=${OUT:-$PWD/build/gpu-out}
WORK=${WORK:-$PWD/build/gpu-launch-cost}
BUDGET_S=${BUDGET_S:-570}
EST_SCALE=${EST_SCALE:-100}
LIB=${ENGINE_LIB:-$PWD/build/engine/libcasestudy_engine.so}
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
declare -A EST=([gpt]=240 [bert]=240 [resnet50]=280 [bert-overlap-aa]=60 [gpt-overlap-aa]=90)

mkdir -p "$OUT" "$WORK/results"
summary=$OUT/summary.txt
: >"$summary"
[[ -x bin/casestudy ]] || { echo "gpu-launch-cost.sh: no bin/casestudy (make cli on the CPU machine, carry bin)" >&2; exit 2; }
if [[ ! -f $LIB ]]; then
  echo "== building the engine (scripts/gpu-check.sh, build stage only)"
  STAGES=" " BUDGET_S=300 OUT="$WORK/build-out" scripts/gpu-check.sh >"$WORK/build.log" 2>&1
  [[ -f $LIB ]] || { echo "gpu-launch-cost.sh: the engine did not build: see $WORK/build.log" >&2; tail -20 "$WORK/build.log"; exit 2; }
fi
echo "engine: $LIB (built in ${SECONDS} s)" | tee -a "$summary"

status=0
for study in $STUDIES; do
  name=$(bin/casestudy plan --json "$study" | python3 -c 'import json,sys; print(json.load(sys.stdin)["study"])') || { status=1; continue; }
  est=${EST[$name]:-120}
  v=EST_${name//-/_}
  est=$(((${!v:-$est} * EST_SCALE + 99) / 100))
  left=$((BUDGET_S - SECONDS))
  echo "== $study ($name): estimate ${est} s, ${left} s left" | tee -a "$summary"
  bin/casestudy plan "$study" --out "$WORK/results" | grep -E '^(study|estimate)' | tee -a "$summary"
  if ((est > left)); then
    echo "skipped: does not fit" | tee -a "$summary"
    status=1
    continue
  fi
  before=$(find "$WORK/results" -mindepth 2 -maxdepth 2 -type d | sort)
  # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
  timeout -s INT "$left" bin/casestudy run "$study" --out "$WORK/results" --engine-lib "$LIB" $RUN_FLAGS \
    >"$WORK/run-$name.log" 2>&1
  rc=$?
  dir=$(comm -13 <(echo "$before") <(find "$WORK/results" -mindepth 2 -maxdepth 2 -type d | sort) | head -1)
  echo "run: exit $rc, $(grep -E '^trials:' "$WORK/run-$name.log" | tail -1), $dir" | tee -a "$summary"
  ((rc == 0)) || status=1
  [[ -n $dir ]] || continue
  bin/casestudy timeline "$dir" | tee "$OUT/timeline-$name.txt" >>"$summary"
  cat "$OUT/timeline-$name.txt"
  [[ -f $dir/report.md ]] && cp "$dir/report.md" "$OUT/report-$name.md"
  tar -czf "$OUT/run-$name.tgz" -C "$(dirname "$dir")" --exclude=logs "$(basename "$dir")"
  tar -czf "$OUT/logs-$name.tgz" -C "$dir" logs
done
echo "== ${SECONDS} s of BUDGET_S=$BUDGET_S" | tee -a "$summary"
exit $status
