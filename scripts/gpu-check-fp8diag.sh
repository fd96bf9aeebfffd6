# shellcheck shell=bash disable=SC2034 # status, stage: gpu-check.sh's
# gpu-check-fp8diag.sh: the fp8-diag stage of scripts/gpu-check.sh, which
# sources this file (it uses gpu-check.sh's engine, fits, log_status, scaled,
# left, note, $WORK, $LOG, $OUT, $PY, $DRY).
#
# fp8-diag (not by default; about 4.5 minutes on an H100 at the defaults): a
# matrix of precision fp8's recipes and diagnostic switches on GPT-2 124M,
# 16 x 1024, in one call. Written to localise per-tensor e5m2's
# "divergence" (loss 18.7 at step 25 where bf16 was at 8.364); its runs on an
# H100 on 2026-12-07 (40 and 120 steps) showed that to be a transient spike
# at steps 25-28 that every FP8 configuration has (per tensor e4m3 and
# per row e5m2 too, and FP8 in the forward only), back on bf16's curve by
# step 30 and below bf16's loss at step 120: no divergence (docs/engine.md). Each configuration of FP8DIAG_RUNS runs FP8DIAG_STEPS (40)
# eager steps from seed 1 (no warm-up: every step's loss is kept), with the
# switches of src/fp8_diag.h:
#   bf16            the reference curve (precision bf16)
#   t-e5m2          per tensor, e5m2 gradients (the recipe studied), every
#                   FP8 layer audited at forward passes 0, K, 2K, ...
#                   (CASESTUDY_FP8_AUDIT_EVERY=FP8DIAG_AUDIT_EVERY, 5)
#   t-e5m2-emulate  the same FP8 operands dequantized and multiplied in fp32
#                   (CASESTUDY_FP8_BWD=emulate): tracks bf16 -> the scaled GEMM
#   t-e5m2-qdq      dz's FP8 values dequantized times unquantized W and x
#   t-e5m2-exact    no quantization in the backward (FP8 forward only)
#   t-e5m2-gradrow  dz scaled per row (dX) and per column (dW) as fp8.scaling
#                   row does, W and x per tensor (CASESTUDY_FP8_GRAD_AXIS=row)
#   t-e5m2-decor    per tensor, dW's copy of dz cast on a grid shifted from
#                   dX's (CASESTUDY_FP8_GRAD_DECORRELATE=1): their rounding
#                   errors nearly independent, as per row
#   t-e4m3, r-e5m2  the controls (per tensor e4m3; per row e5m2), audited
#                   as t-e5m2
#   t-e5m2-dx, t-e5m2-dw  e5m2 only for dX, only for dW (e4m3 the other)
#   t-e5m2-resid    e5m2 only in attention-out and MLP-down (dz: the residual
#                   stream's gradient); t-e5m2-inner only in qkv and MLP-up
#   t-e5m2-plain    per tensor e5m2 without any switch (the audit changes no
#                   value: its losses must equal t-e5m2's)
# Then engine/native/tools/fp8_diag.py writes $OUT/fp8-diag.md (also in
# table.md): per run its losses every 5 steps, the last, the verdict
# (losswindow.py: the median of the last 12 losses against bf16's; over it by
# more than 2% and rising on the run's own curve is DIVERGED, over it without
# rising BEHIND), its transient spikes (a finding, not a verdict) and an audit summary;
# per audited forward pass and layer kind dz's amax, its flushed share, the
# cast's gain and the products' error, gain, signed bias and flipped signs
# against the exact products; and a reading of the matrix by fixed rules.
# The stage FAILs (exit status 1) when a run that ran gave no losses or a
# non-finite one, an audited run printed no audit line, or bf16 gave none;
# runs that do not fit BUDGET_S are skipped (noted in the table), never
# counted as diverged or not.
FP8DIAG_STEPS=${FP8DIAG_STEPS:-40} FP8DIAG_AUDIT_EVERY=${FP8DIAG_AUDIT_EVERY:-5}
FP8DIAG_ALL="bf16 t-e5m2 t-e5m2-emulate t-e5m2-qdq t-e5m2-exact t-e5m2-gradrow t-e5m2-decor t-e4m3 r-e5m2 t-e5m2-dx t-e5m2-dw t-e5m2-resid t-e5m2-inner t-e5m2-plain"
FP8DIAG_RUNS=${FP8DIAG_RUNS:-$FP8DIAG_ALL}
for v in FP8DIAG_STEPS FP8DIAG_AUDIT_EVERY; do
  if ! [[ ${!v} =~ ^[0-9]+$ ]] || ((${!v} < 1)); then
    echo "gpu-check.sh: $v=${!v}: want a whole number of at least 1" >&2
    exit 2
  fi
done
for v in $FP8DIAG_RUNS; do
  [[ " $FP8DIAG_ALL " == *" $v "* ]] || { echo "gpu-check.sh: FP8DIAG_RUNS: '$v': want some of $FP8DIAG_ALL" >&2; exit 2; }
done

stage_fp8_diag() {
  local c='{"family":"gpt","preset":"124m","micro_batch":16,"seq_len":1024,"device":"cuda","seed":1,"graphs":false'
  local t8=',"precision":"fp8","fp8":{"scaling":"tensor"' g="gpt-124m 16x1024 fp8 diag" r cfg envw est
  local audit="CASESTUDY_FP8_AUDIT_EVERY=$FP8DIAG_AUDIT_EVERY" args=() envs=() audited=() skipped=()
  [[ $DRY == 1 ]] || rm -f "$WORK"/fp8diag-*.json "$WORK/fp8-diag.md" "$OUT/fp8-diag.md"
  for r in $FP8DIAG_RUNS; do
    # Estimates (s): the launch and first step ~10, an eager step ~0.04, an
    # emulated one ~0.25 (fp32 products), an audited one ~1.5 (48 layers).
    local plain=$((10 + FP8DIAG_STEPS / 20)) heavy=$((10 + FP8DIAG_STEPS * 3 / 10))
    local audited_est=$((12 + FP8DIAG_STEPS / 20 + 2 * (FP8DIAG_STEPS / FP8DIAG_AUDIT_EVERY + 1)))
    envw="" est=$plain cfg="$c$t8}}"
    case $r in
      bf16) cfg="$c,\"precision\":\"bf16\"}" ;;
      t-e5m2) envw=$audit est=$audited_est ;;
      t-e5m2-emulate) envw=CASESTUDY_FP8_BWD=emulate est=$heavy ;;
      t-e5m2-qdq) envw=CASESTUDY_FP8_BWD=qdq est=$heavy ;;
      t-e5m2-exact) envw=CASESTUDY_FP8_BWD=exact est=$heavy ;;
      t-e5m2-gradrow) envw=CASESTUDY_FP8_GRAD_AXIS=row ;;
      t-e5m2-decor) envw=CASESTUDY_FP8_GRAD_DECORRELATE=1 ;;
      t-e4m3) cfg="$c$t8,\"grad\":\"e4m3\"}}" envw=$audit est=$audited_est ;;
      r-e5m2) cfg="$c,\"precision\":\"fp8\",\"fp8\":{\"scaling\":\"row\"}}" envw=$audit est=$audited_est ;;
      t-e5m2-dx) envw=CASESTUDY_FP8_E5M2_FOR=dx ;;
      t-e5m2-dw) envw=CASESTUDY_FP8_E5M2_FOR=dw ;;
      t-e5m2-resid) envw=CASESTUDY_FP8_E5M2_FOR=attn_out,mlp_down ;;
      t-e5m2-inner) envw=CASESTUDY_FP8_E5M2_FOR=qkv,mlp_up ;;
      t-e5m2-plain) ;;
    esac
    if [[ $DRY != 1 ]] && (($(scaled "$est") > $(left))); then skipped+=("$r"); fi
    run_env="$envw" run_warmup=0 run_steps=$FP8DIAG_STEPS engine "$g" "$r" "$est" "$cfg" --losses "$WORK/fp8diag-$r.json"
    [[ " ${skipped[*]} " == *" $r "* ]] && continue
    args+=("$r=$WORK/fp8diag-$r.json:$LOG/$stage-$r.err")
    envs+=(--env "$r=${envw:-(none)}")
    [[ $envw == "$audit" ]] && audited+=("$r")
  done
  [[ $DRY == 1 ]] && { echo "        $PY engine/native/tools/fp8_diag.py ... > $OUT/fp8-diag.md"; return; }
  if ((${#args[@]} == 0)); then
    log_status "fp8-diag: every run skipped for time (${skipped[*]})"
    return
  fi
  local rc=0 list
  list=$(IFS=,; echo "${audited[*]}")
  "$PY" engine/native/tools/fp8_diag.py --audited "$list" "${envs[@]}" "${args[@]}" >"$WORK/fp8-diag.md" 2>"$LOG/fp8-diag.err" || rc=$?
  ((${#skipped[@]})) && echo "- skipped for time: ${skipped[*]}" >>"$WORK/fp8-diag.md"
  cp "$WORK/fp8-diag.md" "$OUT/fp8-diag.md"
  mkdir -p "$OUT/fp8-losses" && cp "$WORK"/fp8diag-*.json "$OUT/fp8-losses/" 2>/dev/null # every step's loss
  local div spk behind
  div=$(grep -E '^\| ' "$WORK/fp8-diag.md" | grep -F DIVERGED | cut -d'|' -f2 | tr -d ' ' | paste -sd' ' -)
  behind=$(grep -E '^\| ' "$WORK/fp8-diag.md" | grep -F BEHIND | cut -d'|' -f2 | tr -d ' ' | paste -sd' ' -)
  spk=$(grep -E '^- transient spikes' "$WORK/fp8-diag.md" | head -1 | cut -c3-)
  if ((rc == 0)); then
    log_status "fp8-diag: ok, ${#args[@]} runs of $FP8DIAG_STEPS steps; diverged: ${div:-none}; behind bf16: ${behind:-none}; ${spk:-no spikes}${skipped:+; skipped for time: ${skipped[*]}} (fp8-diag.md)"
  else
    log_status "fp8-diag: FAIL (fp8_diag.py exit $rc; diverged: ${div:-none}): $(grep -E '^- FAIL' "$WORK/fp8-diag.md" | head -3 | tr '\n' ' ')$(tail -c 300 "$LOG/fp8-diag.err" | tr '\n' ' ') (fp8-diag.md, logs/fp8-diag-*.err)"
    status=1
  fi
}
# A table of an earlier call is not published as this one's.
[[ $DRY == 1 ]] || rm -f "$WORK/fp8-diag.md"
