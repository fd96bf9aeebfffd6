#!/usr/bin/env bash
# gpu-rehearse.sh: rehearse the multi-GPU studies on the GPUs of this machine
# (docs/rehearsal.md): bin/casestudy run STUDY --rehearse --rehearse-distinct
# for each study, every rank a process sharing the GPUs present, host-staged;
# one trial per distinct layout and path, 1 warm-up and REHEARSE_STEPS (3)
# steps. From the repository root, after the engine is built (scripts/gpu-check.sh's
# build stage, or ENGINE_LIB) and with bin/casestudy carried from the CPU
# machine (make cli).
#
# Before each study, `casestudy plan STUDY --rehearse --rehearse-distinct` on
# this machine's GPUs (count and memory from nvidia-smi) says which trials run,
# which layouts do not fit (refused at plan time with the number of ranks per
# GPU that would: the answer for that layout, listed as REFUSED, not run) and
# how many ranks the largest has; the study's timeout is sized from that:
# 30 s + per trial run (LAUNCH_S + one second a rank) + two one-rank launches
# a trial (the reference and its fp32 twin, LAUNCH_S each) + the faults (two
# launches and the 15 s heartbeat limit of the stalled rank) where they run.
# The timeout is an upper bound (about half of it is expected); a study that
# does not have half of it left of BUDGET_S is skipped with a line saying so,
# and its timeout is cut to what is left. The fault launches run in FAULT_STUDIES only (the
# runner classifies them the same whatever the study).
#
# Expected on one H100 (80 GB): about 400 s for DEFAULT_STUDIES, most
# important first; bert ddp8 and the three multinode layouts (16 ranks) are
# refused on one 80 GB GPU (gpt and resnet50 multinode fit 2 H100s or one
# H200, bert multinode 3 GPUs), as is bert/zero.yaml's zero.stage 0 (ZeRO 1
# and 2 run).
#
# $OUT (default build/gpu-rehearse-out) gets rehearse.md (per study: its plan
# line, exit status and its report.md's Rehearsal section) and rehearse.tgz
# (per study the run directory's summary.json, manifest.json, trials.jsonl and
# report.md, under STUDY-NAME/; logs in rehearse-logs.tgz). Commit them under
# results/reference/ with the date.
#
# Environment: OUT, WORK (build/gpu-rehearse), BUDGET_S (420), LAUNCH_S (8),
# ENGINE_BUILD (build/engine), ENGINE_LIB, REHEARSE_STEPS (3), STUDIES
# (default below), FAULT_STUDIES (studies/gpt/ddp2-quick.yaml), GPUS and
# GPU_GIB (default: nvidia-smi's; 1 and 79.6 without it), DRY_RUN=1 (print
# each study's plan and timeout, run nothing).
# Exit status: 0 when every study rehearsed ran and agreed (checksums, losses,
# faults); 1 when one failed, disagreed or was skipped for time; 2 bad
# environment. Layouts refused at plan time are listed, not failed.
set -uo pipefail
SECONDS=0

OUT=${OUT:-$PWD/build/gpu-rehearse-out}
WORK=${WORK:-$PWD/build/gpu-rehearse}
BUDGET_S=${BUDGET_S:-420}
LAUNCH_S=${LAUNCH_S:-8}
STEPS=${REHEARSE_STEPS:-3}
BUILD_DIR=${ENGINE_BUILD:-build/engine}
LIB=${ENGINE_LIB:-$BUILD_DIR/libcasestudy_engine.so}
[[ $LIB == /* ]] || LIB=$PWD/$LIB
DRY=${DRY_RUN:-0}
# Most important first: the paths nothing else runs on CUDA (pipeline stages,
# compression, ZeRO, tensor parallelism), then every model at 2, 4 and 8 ranks; the studies that
# do not fit one 80 GB GPU last (a plan-time refusal costs a second).
DEFAULT_STUDIES="studies/gpt/ddp2-quick.yaml studies/gpt/pipeline.yaml studies/gpt/ddp.yaml studies/bert/zero.yaml studies/gpt/tp.yaml
studies/bert/ddp2-quick.yaml studies/resnet50/ddp2-quick.yaml studies/gpt/ddp4-quick.yaml studies/bert/ddp4-quick.yaml
studies/resnet50/ddp4-quick.yaml studies/resnet50/ddp8-quick.yaml studies/gpt/ddp8-quick.yaml studies/bert/ddp8-quick.yaml
studies/gpt/multinode.yaml studies/bert/multinode.yaml studies/resnet50/multinode.yaml"
STUDIES=${STUDIES:-$DEFAULT_STUDIES}
FAULT_STUDIES=${FAULT_STUDIES:-studies/gpt/ddp2-quick.yaml}
export NCCL_NVLS_ENABLE=0

for v in BUDGET_S LAUNCH_S STEPS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu-rehearse.sh: $v=${!v}: want a whole number" >&2; exit 2; }
done
for s in $STUDIES; do
  [[ -f $s ]] || { echo "gpu-rehearse.sh: STUDIES: no such study file: $s" >&2; exit 2; }
done
if [[ -z ${GPUS:-} || -z ${GPU_GIB:-} ]]; then
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | tr -dc 0-9)
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  GPUS=${GPUS:-$((n > 0 ? n : 1))}
  if [[ -n $mib ]]; then GPU_GIB=${GPU_GIB:-$(awk -v m="$mib" 'BEGIN { printf "%.1f", m / 1024 }')}; fi
  GPU_GIB=${GPU_GIB:-79.6}
fi
[[ $GPUS =~ ^[0-9]+$ && $GPU_GIB =~ ^[0-9.]+$ ]] || { echo "gpu-rehearse.sh: GPUS=$GPUS GPU_GIB=$GPU_GIB: want numbers" >&2; exit 2; }
have_cli=1
[[ -x bin/casestudy && -f $LIB ]] || have_cli=0
if [[ $DRY != 1 ]]; then
  [[ -x bin/casestudy ]] || { echo "gpu-rehearse.sh: no bin/casestudy (make cli on the CPU machine; carry bin)" >&2; exit 2; }
  [[ -f $LIB ]] || { echo "gpu-rehearse.sh: no engine library at $LIB (build it: scripts/gpu-check.sh with STAGES=' ')" >&2; exit 2; }
fi

# plan_line STUDY: the plan's rehearsal line ("rehearsal: N trials run, M
# skipped, R refused; at most K ranks a trial"), or "refused: ..." when run
# --rehearse would refuse the whole study; the full plan in $WORK/logs.
plan_line() {
  local name=$1 s=$2 rc=0
  bin/casestudy plan "$s" --rehearse --rehearse-distinct --rehearse-gpus "$GPUS" --rehearse-gpu-gib "$GPU_GIB" \
    --engine-lib "$LIB" >"$WORK/logs/$name.plan" 2>&1 || rc=$?
  if ((rc == 3)); then
    echo "refused: $(grep -m1 -oE 'trial [0-9a-f]+ \(.*' "$WORK/logs/$name.plan")"
  elif ((rc != 0)); then
    echo "plan failed (exit $rc): $(tail -1 "$WORK/logs/$name.plan")"
  else
    grep -m1 '^rehearsal: ' "$WORK/logs/$name.plan" || echo "plan failed: no rehearsal line"
  fi
}

# cap_of LINE FAULTS PLAN: the study's timeout from its plan line, plus a
# launch of its ranks for each tensor-parallel trial that runs in 16-bit (its
# fp32 twin, docs/rehearsal.md), and a one-rank launch for each twin at a
# smaller micro-batch (its own fp32 reference), counted from the plan's trial
# lines.
cap_of() {
  local runs ranks faults=$2 twins twinrefs
  runs=$(sed -n 's/^rehearsal: \([0-9]*\) trials run.*/\1/p' <<<"$1")
  ranks=$(sed -n 's/.*at most \([0-9]*\) ranks.*/\1/p' <<<"$1")
  [[ -n $runs && -n $ranks ]] || { echo 0; return; }
  twins=$(grep -cE '  runs( \(its fp32 twin at micro-batch [0-9]+\))?  .*, (bf16|fp16|tf32), .*, tp [0-9]+' "$3" 2>/dev/null)
  twinrefs=$(grep -c 'its fp32 twin at micro-batch' "$3" 2>/dev/null)
  local cap=$((30 + (runs + ${twins:-0}) * (LAUNCH_S + ranks) + (2 * runs + ${twinrefs:-0}) * LAUNCH_S))
  ((faults)) && cap=$((cap + 2 * (LAUNCH_S + ranks) + 15))
  echo "$cap"
}

rm -rf "$WORK"
mkdir -p "$OUT" "$WORK/logs" "$WORK/pack"
rm -f "$OUT/rehearse.md" "$OUT/rehearse.tgz"
status=0
refused=()
left() { echo $((BUDGET_S - SECONDS)); }
{
  echo "# gpu-rehearse, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "Rehearsal, not a measurement: every rank a process on the GPUs of this machine, host-staged (docs/rehearsal.md)."
  echo "Plans checked against $GPUS GPU(s) of $GPU_GIB GiB."
  echo
  echo '```'
  git rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>/dev/null
  echo '```'
} >"$WORK/rehearse.md"

for s in $STUDIES; do
  name=$(basename "$(dirname "$s")")-$(basename "$s" .yaml)
  faults=0
  for f in $FAULT_STUDIES; do [[ $f == "$s" ]] && faults=1; done
  if ((have_cli == 0)); then # DRY_RUN without the binaries: the list only
    echo "  $s (faults: $faults)"
    continue
  fi
  line=$(plan_line "$name" "$s")
  if [[ $line == refused:* ]]; then
    echo "- $s: NOT rehearsed, $line (plan: logs/$name.plan in rehearse-logs.tgz)" | tee -a "$WORK/rehearse.md"
    refused+=("$s")
    continue
  fi
  if [[ $line != rehearsal:* ]]; then
    echo "- $s: $line" | tee -a "$WORK/rehearse.md"
    status=1
    continue
  fi
  [[ $line == *" 0 refused"* ]] || refused+=("$s (some layouts)")
  cap=$(cap_of "$line" "$faults" "$WORK/logs/$name.plan")
  if [[ $DRY == 1 ]]; then
    echo "  $s: $line; timeout $cap s (faults: $faults)"
    continue
  fi
  if ((cap / 2 > $(left))); then # the cap is an upper bound: about half of it is expected
    echo "- $s: skipped, needs about $((cap / 2)) s (up to $cap s: $line), $(left) s left of BUDGET_S=$BUDGET_S" | tee -a "$WORK/rehearse.md"
    status=1
    continue
  fi
  ((cap > $(left))) && cap=$(left)
  echo "== $s (at $SECONDS s, timeout $cap s): $line"
  t0=$SECONDS
  rc=0
  fault_flag=--rehearse-faults=false
  ((faults)) && fault_flag=--rehearse-faults=true
  timeout -k 5 "$cap" bin/casestudy run "$s" --rehearse --rehearse-distinct "$fault_flag" --warmup 1 --steps "$STEPS" \
    --engine-lib "$LIB" --out "$WORK/results/$name" >"$WORK/logs/$name.out" 2>"$WORK/logs/$name.err" || rc=$?
  dir=$(find "$WORK/results/$name" -mindepth 2 -maxdepth 2 -type d 2>/dev/null | head -1)
  {
    echo
    echo "## $s: exit $rc in $((SECONDS - t0)) s (timeout $cap s)"
    echo
    echo "plan: $line"
    grep 'REFUSED' "$WORK/logs/$name.plan" | sed 's/^/    /'
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
if [[ $DRY == 1 ]]; then
  if ((have_cli == 0)); then
    echo "gpu-rehearse.sh: dry run without bin/casestudy or $LIB: the plans were not checked (make cli; ENGINE_LIB)"
  else
    echo "gpu-rehearse.sh: dry run, $GPUS GPU(s) of $GPU_GIB GiB, BUDGET_S=$BUDGET_S; refused at plan time: ${refused[*]:-none}"
  fi
  exit 0
fi
{
  echo
  echo "Refused at plan time on $GPUS GPU(s) of $GPU_GIB GiB (not rehearsed here): ${refused[*]:-none}"
} >>"$WORK/rehearse.md"
cp "$WORK/rehearse.md" "$OUT/rehearse.md"
cp "$WORK"/logs/*.plan "$WORK/pack/" 2>/dev/null
tar -czf "$OUT/rehearse.tgz" -C "$WORK/pack" . 2>/dev/null
tar -czf "$OUT/rehearse-logs.tgz" -C "$WORK" logs 2>/dev/null
echo "== done in $SECONDS s, exit $status; $OUT: rehearse.md, rehearse.tgz, rehearse-logs.tgz"
cat "$OUT/rehearse.md"
exit "$status"
