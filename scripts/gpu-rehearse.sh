#!/usr/bin/env bash
# gpu-rehearse.sh: rehearse the multi-GPU studies on the GPUs of this machine
# (docs/rehearsal.md): bin/casestudy run STUDY --rehearse --rehearse-distinct
# for each study, every rank a process sharing the GPUs present, host-staged;
# one trial per distinct layout and path, 1 warm-up and REHEARSE_STEPS (3)
# steps. From the repository root, after the engine is built (scripts/gpu-check.sh's
# build stage, or ENGINE_LIB) and with bin/casestudy carried from the CPU
# machine (make cli). Studies run most important first while the budget lasts.
#
# $OUT (default build/gpu-rehearse-out) gets rehearse.md (per study: its exit
# status and its report.md, the Rehearsal section) and rehearse.tgz (per study
# the run directory's summary.json, manifest.json and trials.jsonl, under
# STUDY-NAME/; logs stay out). Commit them under results/reference/ with the date.
#
# Environment: OUT, WORK (build/gpu-rehearse), BUDGET_S (330), CAP_STUDY (150:
# one study's timeout), ENGINE_BUILD (build/engine), ENGINE_LIB, REHEARSE_STEPS
# (3), STUDIES (default below), DRY_RUN=1 (print the plan, run nothing).
# Exit status: 0 when every study rehearsed ran and agreed (checksums, losses,
# faults); 1 when one failed, disagreed or was skipped for time; 2 bad environment.
set -uo pipefail
SECONDS=0

OUT=${OUT:-$PWD/build/gpu-rehearse-out}
WORK=${WORK:-$PWD/build/gpu-rehearse}
BUDGET_S=${BUDGET_S:-330}
CAP_STUDY=${CAP_STUDY:-150}
STEPS=${REHEARSE_STEPS:-3}
BUILD_DIR=${ENGINE_BUILD:-build/engine}
LIB=${ENGINE_LIB:-$BUILD_DIR/libcasestudy_engine.so}
[[ $LIB == /* ]] || LIB=$PWD/$LIB
DRY=${DRY_RUN:-0}
DEFAULT_STUDIES="studies/gpt/ddp2-quick.yaml studies/gpt/pipeline.yaml studies/gpt/ddp.yaml studies/gpt/ddp8-quick.yaml
studies/bert/ddp2-quick.yaml studies/resnet50/ddp2-quick.yaml studies/gpt/multinode.yaml studies/gpt/ddp4-quick.yaml
studies/bert/ddp4-quick.yaml studies/resnet50/ddp4-quick.yaml studies/bert/ddp8-quick.yaml studies/resnet50/ddp8-quick.yaml
studies/bert/multinode.yaml studies/resnet50/multinode.yaml"
STUDIES=${STUDIES:-$DEFAULT_STUDIES}
export NCCL_NVLS_ENABLE=0

for v in BUDGET_S CAP_STUDY STEPS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu-rehearse.sh: $v=${!v}: want a whole number" >&2; exit 2; }
done
for s in $STUDIES; do
  [[ -f $s ]] || { echo "gpu-rehearse.sh: STUDIES: no such study file: $s" >&2; exit 2; }
done
if [[ $DRY == 1 ]]; then
  echo "gpu-rehearse.sh: would rehearse, $BUDGET_S s budget, $CAP_STUDY s each at most:"
  printf '  %s\n' $STUDIES
  exit 0
fi
[[ -x bin/casestudy ]] || { echo "gpu-rehearse.sh: no bin/casestudy (make cli on the CPU machine; carry bin)" >&2; exit 2; }
[[ -f $LIB ]] || { echo "gpu-rehearse.sh: no engine library at $LIB (build it: scripts/gpu-check.sh with STAGES=' ')" >&2; exit 2; }

rm -rf "$WORK"
mkdir -p "$OUT" "$WORK/logs" "$WORK/pack"
rm -f "$OUT/rehearse.md" "$OUT/rehearse.tgz"
status=0
left() { echo $((BUDGET_S - SECONDS)); }
min() { if (($1 < $2)); then echo "$1"; else echo "$2"; fi; }
{
  echo "# gpu-rehearse, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "Rehearsal, not a measurement: every rank a process on the GPUs of this machine, host-staged (docs/rehearsal.md)."
  echo
  echo '```'
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null
  echo '```'
} >"$WORK/rehearse.md"

for s in $STUDIES; do
  name=$(basename "$(dirname "$s")")-$(basename "$s" .yaml)
  t=$(min "$CAP_STUDY" "$(left)")
  if ((t < 30)); then
    echo "- $s: skipped, $(left) s left of BUDGET_S=$BUDGET_S" | tee -a "$WORK/rehearse.md"
    status=1
    continue
  fi
  echo "== $s (at $SECONDS s, timeout $t s)"
  t0=$SECONDS
  rc=0
  timeout -k 5 "$t" bin/casestudy run "$s" --rehearse --rehearse-distinct --warmup 1 --steps "$STEPS" \
    --engine-lib "$LIB" --out "$WORK/results/$name" >"$WORK/logs/$name.out" 2>"$WORK/logs/$name.err" || rc=$?
  dir=$(find "$WORK/results/$name" -mindepth 2 -maxdepth 2 -type d 2>/dev/null | head -1)
  {
    echo
    echo "## $s: exit $rc in $((SECONDS - t0)) s"
    echo
    if [[ -n $dir && -f $dir/report.md ]]; then
      sed '1,/^## Rehearsal/d' "$dir/report.md"
    else
      echo '```'
      tail -20 "$WORK/logs/$name.err"
      echo '```'
    fi
  } >>"$WORK/rehearse.md"
  if [[ -n $dir ]]; then
    mkdir -p "$WORK/pack/$name"
    for f in summary.json manifest.json trials.jsonl report.md; do
      [[ -f $dir/$f ]] && cp "$dir/$f" "$WORK/pack/$name/"
    done
  fi
  if ((rc != 0)) || { [[ -n $dir && -f $dir/summary.json ]] && grep -q 'disagree' "$dir/summary.json"; }; then
    status=1
  fi
  [[ -n $dir ]] || status=1
done
cp "$WORK/rehearse.md" "$OUT/rehearse.md"
tar -czf "$OUT/rehearse.tgz" -C "$WORK/pack" . 2>/dev/null
tar -czf "$OUT/rehearse-logs.tgz" -C "$WORK" logs 2>/dev/null
echo "== done in $SECONDS s, exit $status; $OUT: rehearse.md, rehearse.tgz, rehearse-logs.tgz"
cat "$OUT/rehearse.md"
exit "$status"
