#!/usr/bin/env bash
# predict-validate.sh: the CPU Gloo validation of the multi-GPU prediction
# (issue 40, docs/predict.md). In ROUNDS interleaved rounds, for N in $RANKS
# (default "2 4"), it benchmarks Gloo's all-reduce on N ranks (alone, with
# the compute a collective costs a compute loop beside it: --interference,
# and beside one busy compute thread per rank: --beside 1), measures the
# one-rank inputs of studies/gpt/predict-cpu.yaml (run --predict N: a world of
# one with the reducer on) as N copies at once, sharing this host as the N
# ranks will, then the stretch calibration (run --predict N --interfere gloo:
# every other step each trial's own buckets as Gloo all-reduces on a group of
# N whose other ranks are helper threads, so that the backward pays what a
# rank's does for its collectives; each trial's κ is its loaded over clean
# backward), and then measures the study on N ranks, REPEATS launches a
# trial each time (1), so that a busy host's load falls alike on all. It predicts the
# study on N ranks from every input launch (pooled, medians;
# --concurrent-inputs; --kappa auto with the calibration runs) and compares
# with every N-rank launch: the median absolute error of the step time, and
# whether the predicted best trial is the measured best where the
# measurement decides its best (its best trial's launches separated from
# every other trial's: predict's winner_decidable, runs.DecideWinner). Run it
# on a quiet machine.
#
#   scripts/predict-validate.sh [OUT]    (default OUT: results/predict-validate)
#
# Needs bin/casestudy and the engine (make cli engine), and python3 (the
# verdicts are read from predict's JSON). Prints a Markdown summary
# (docs/predict.md has the committed ones) and writes OUT/summary.md and
# OUT/table.md. scripts/gpu-check.sh's stage predict-cpu runs it on the GPU
# machine's idle cores.
#
# Environment:
#   RANKS (2 4), ROUNDS (3), BIN (bin/casestudy), ENGINE_LIB (the engine
#   library; default: the CLI's, $CASESTUDY_ENGINE_LIB or next to the binary),
#   PYTHON (python3), SIZES (the benchmarks' sizes), STUDY (the study:
#     studies/gpt/predict-cpu.yaml),
#   SHADOW (1): the stretch calibration each round (--interfere gloo) and
#     the verdict's predictions with it (--kappa auto); 0: none, and the
#     verdict's predictions without a stretch,
#   CAL_STEPS (16): the calibration launch's measured steps (half loaded),
#   BESIDE (0 with SHADOW, else 1): bench allreduce --beside 1 each round
#     and predict --fit-beside (the collectives' pace beside compute from a
#     benchmark; the calibration times the trial's own buckets instead),
#   INTERFERENCE (0): the pairs of compute loops (alone, beside the
#     collectives) the benchmark runs per size, for a comparison line with
#     predict --fit-stretch (the matmul loop's stretch, the earlier model;
#     not the verdict); 0: none,
#   PIN (auto): taskset each N-rank run, its benchmarks and its N one-rank
#     copies to the same N x CORES_PER_RANK cores (default 2 a rank: its
#     compute thread, threads: 1 in the study, and Gloo's), so that ranks need
#     not share cores and the inputs run where, and as freely as, the ranks
#     do; auto pins when taskset exists and the host has more than the
#     largest N x CORES_PER_RANK cores (core 0 is left to the runners), 1
#     insists, 0 never,
#   CORES_PER_RANK (2): one number for every N, or N:C pairs, one for each N
#     of RANKS ("2:4 4:3": 2 ranks on 8 cores, 4 on 12),
#   BUDGET_S (0: none): a round starts only if the longest round so far and
#     the predictions (~20 s) still fit in BUDGET_S seconds from the start; the
#     summary says how many rounds ran (at least one),
#   LAUNCH_TIMEOUT (300): each command's deadline in seconds (timeout(1)),
#   REPEATS (1): the N-rank run's launches a trial each round (run --repeats:
#     more launches for the winner's test at less than a round's cost; the
#     inputs, benchmarks and calibration stay one a round),
#   SCHED (1): sample the ranks' and copies' threads (scripts/sched-sample.sh:
#     CPU and run-queue time) beside the copies, the calibration and the
#     N-rank run, for OUT/decompose$N.md; 0: none.
# Beside the verdict it writes OUT/decompose$N.md (scripts/predict-decompose.py:
# per trial, where the N-rank step goes against the inputs, the calibration and
# the model; each rank's compute; with SCHED, each process's threads).
# Exit 0 when every median |error| is at most 10% and, at every N, the
# measurement decides its winner and the predicted best trial is that one
# (the bar); 1 when a median |error| is above 10% or a decided winner is not
# the predicted one; 4 when the errors meet the bar and every decided winner
# was predicted but at some N the measurement does not decide its winner
# ("winner not decidable by the measurement": not judged on the winner
# there, neither met nor failed); 3 when something could not run (a missing
# tool, a command that failed or ran past its deadline), when BUDGET_S left
# one round of ROUNDS >= 2 (one launch a trial: not judged), or when a trial
# was predicted but not measured, or measured but not predicted (not judged).
# shellcheck disable=SC2317 # start, on and stop are called indirectly (must, the trap)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/predict-validate}
RANKS=${RANKS:-2 4}
ROUNDS=${ROUNDS:-3}
BIN=${BIN:-bin/casestudy}
PY=${PYTHON:-python3}
STUDY=${STUDY:-studies/gpt/predict-cpu.yaml}
SIZES=${SIZES:-16K,256K,1M,4M,16M}
PIN=${PIN:-auto}
CORES_PER_RANK=${CORES_PER_RANK:-2}
BUDGET_S=${BUDGET_S:-0}
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-300}
INTERFERENCE=${INTERFERENCE:-0}
SHADOW=${SHADOW:-1}
CAL_STEPS=${CAL_STEPS:-16}
BESIDE=${BESIDE:-auto}
SCHED=${SCHED:-1}
REPEATS=${REPEATS:-1}
SECONDS=0
exec 3>&2 # the script's own stderr: die's message, whatever a command's redirections
die() {
  echo "predict-validate.sh: $*" >&3
  # shellcheck disable=SC2046 # one pid a word
  kill -TERM $(jobs -p) 2>/dev/null || true # the other copies of a round: none outlives the script
  wait
  exit 3
}
[[ $BESIDE == auto && ${SHADOW} =~ ^[0-9]+$ ]] && BESIDE=$((SHADOW ? 0 : 1))
for v in ROUNDS BUDGET_S LAUNCH_TIMEOUT INTERFERENCE SHADOW CAL_STEPS BESIDE SCHED REPEATS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v}: want a whole number"
done
((ROUNDS >= 1 && LAUNCH_TIMEOUT >= 1 && REPEATS >= 1 && CAL_STEPS >= 2)) || die "ROUNDS, LAUNCH_TIMEOUT, REPEATS: want 1 or more; CAL_STEPS 2 or more"
[[ $PIN =~ ^(auto|0|1)$ ]] || die "PIN=$PIN: want auto, 0 or 1"
maxn=0
for n in $RANKS; do
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2)); then die "RANKS: '$n': want whole numbers of 2 or more"; fi
  ((n > maxn)) && maxn=$n
done
((maxn > 0)) || die "RANKS is empty"
# CORES_PER_RANK: one number, or N:C for each N of RANKS (cpr[N]).
declare -A cpr=()
if [[ $CORES_PER_RANK =~ ^[0-9]+$ ]]; then
  for n in $RANKS; do cpr[$n]=$CORES_PER_RANK; done
else
  for p in $CORES_PER_RANK; do
    [[ $p =~ ^([0-9]+):([0-9]+)$ ]] || die "CORES_PER_RANK: '$p': want a whole number, or N:C pairs such as \"2:4 4:3\""
    [[ " $RANKS " == *" ${BASH_REMATCH[1]} "* ]] || die "CORES_PER_RANK: '$p': $((10#${BASH_REMATCH[1]})) ranks is not in RANKS=$RANKS"
    [[ -z ${cpr[${BASH_REMATCH[1]}]:-} ]] || die "CORES_PER_RANK: ${BASH_REMATCH[1]} ranks given twice"
    cpr[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  done
  for n in $RANKS; do [[ -n ${cpr[$n]:-} ]] || die "CORES_PER_RANK=$CORES_PER_RANK: no N:C pair for $n ranks (RANKS=$RANKS)"; done
fi
for n in $RANKS; do ((cpr[$n] >= 1)) || die "CORES_PER_RANK: $n ranks: want 1 or more cores a rank"; done
[[ -x $BIN ]] || die "no $BIN (make cli)"
[[ -f $STUDY ]] || die "STUDY=$STUDY: no such file"
sname=$(awk '/^name:/ {print $2; exit}' "$STUDY")
[[ -n $sname ]] || die "STUDY=$STUDY: no name: line"
command -v "$PY" >/dev/null || die "needs $PY (PYTHON) to read predict's JSON"
command -v timeout >/dev/null || die "needs timeout(1)"
if [[ -n ${ENGINE_LIB:-} ]]; then
  [[ -f $ENGINE_LIB ]] || die "ENGINE_LIB=$ENGINE_LIB: no such file"
  export CASESTUDY_ENGINE_LIB=$ENGINE_LIB # the CLI's --engine-lib default
fi

# Pinning: the N-rank run on the allowed cores first..first+N*C-1 (by
# position in this process's affinity list: a container's cpuset need not
# start at 0), and its N one-rank copies on the same cores.
allowed=()
IFS=, read -ra parts <<<"$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status 2>/dev/null)"
for p in "${parts[@]}"; do
  if [[ $p =~ ^([0-9]+)-([0-9]+)$ ]]; then
    for ((c = BASH_REMATCH[1]; c <= BASH_REMATCH[2]; c++)); do allowed+=("$c"); done
  elif [[ $p =~ ^[0-9]+$ ]]; then
    allowed+=("$p")
  fi
done
((${#allowed[@]})) || mapfile -t allowed < <(seq 0 $(($(nproc) - 1)))
cores=${#allowed[@]}
need=0 # the most cores one N's run is pinned to
for n in $RANKS; do ((n * cpr[$n] > need)) && need=$((n * cpr[$n])); done
first=0
((cores > need)) && first=1 # core 0 to the runners and the system
case $PIN in
  auto) pin=0; command -v taskset >/dev/null && ((cores > need)) && pin=1 ;;
  1) pin=1
     command -v taskset >/dev/null || die "PIN=1: no taskset"
     ((cores >= need)) || die "PIN=1: CORES_PER_RANK=$CORES_PER_RANK needs $need cores, this host has $cores" ;;
  0) pin=0 ;;
esac
# cpus FROM COUNT: taskset's list of COUNT allowed cores from position first+FROM.
cpus() { local IFS=,; echo "${allowed[*]:first+$1:$2}"; }
# start CPULIST CMD...: CMD in the background under its deadline, pinned to
# CPULIST when pinning ($! its pid). Commands run in the background and are
# waited for, so that a signal to this script is handled at once: the trap
# below passes it on (timeout(1) passes it to its command: casestudy stops the
# trial in flight and records it) and exits.
start() {
  local list=$1
  shift
  if ((pin)); then
    timeout -k 5 "$LAUNCH_TIMEOUT" taskset -c "$list" "$@" &
  else
    timeout -k 5 "$LAUNCH_TIMEOUT" "$@" &
  fi
}
# on CPULIST CMD...: start, and wait for it.
on() {
  start "$@"
  wait $!
}
stop() {
  trap - TERM INT
  echo "predict-validate.sh: stopped by a signal after ${SECONDS} s" >&3
  # shellcheck disable=SC2046 # one pid a word
  kill -TERM $(jobs -p) 2>/dev/null || true
  wait
  exit 143
}
trap stop TERM INT
# sampling FILE / sampled: scripts/sched-sample.sh into FILE beside what runs
# between them (SCHED=1; its pid in spid, killed by sampled, die and stop).
spid=
sampling() {
  ((SCHED)) || return 0
  if ((pin && first == 1)); then # on core 0 with the runners, off the ranks' cores
    taskset -c "${allowed[0]}" scripts/sched-sample.sh "$1" &
  else
    scripts/sched-sample.sh "$1" &
  fi
  spid=$!
}
sampled() {
  [[ -n $spid ]] || return 0
  kill -TERM "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null || true # its status is the signal
  spid=
}
# must WHAT CMD...: CMD, or exit 3 naming WHAT and its log.
must() {
  local what=$1 rc=0
  shift
  "$@" || rc=$?
  ((rc == 0)) && return
  ((rc == 124 || rc == 137)) && die "$what: past its deadline of ${LAUNCH_TIMEOUT} s (LAUNCH_TIMEOUT)"
  die "$what: exit $rc"
}

rm -rf "$OUT" && mkdir -p "$OUT" && : >"$OUT/compare.md"
tpc=$( (lscpu 2>/dev/null || true) | awk -F: '/^Thread\(s\) per core/ {gsub(/ /, "", $2); print $2}')
host="host: $cores cores ($(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo '?'); ${tpc:-?} threads per core), load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
if ((pin)); then
  host+="; pinned (taskset): each N-rank run, its benchmarks and its N one-rank copies on the first N x C of cores $(cpus 0 "$need") ($(for n in $RANKS; do printf '%s ranks x %s cores; ' "$n" "${cpr[$n]}"; done | sed 's/; $//'))"
else
  host+="; not pinned"
fi
# A rank runs its compute thread and three Gloo threads: with fewer than 4 cores
# each, a rank's collectives stall for milliseconds while its compute runs (the
# twenty-third session, docs/predict.md "Out of sample": 2 ranks at 4 cores a
# rank 0% of 1 MiB collectives stalled, median |error| 2.6%; at 2 cores 13-46%
# and 18%), which no one-rank input shows: the verdict is then of the host too.
# 4 ranks at 3 cores (twenty-fourth session) met the bar once (8.7%) with the
# stalls still there (18-33% of the 1 MiB all-reduces, some beyond the
# calibration's): not enough to call 3 cores uncontended.
contended=""
if ((!pin)); then
  contended="cores a rank unknown (not pinned)"
  host+="; cores a rank unknown (not pinned): with fewer than 4 (compute + Gloo's threads) collectives stall beyond what the model sees (docs/predict.md \"Out of sample\")"
else
  for n in $RANKS; do
    ((cpr[$n] < 4)) && contended+="${contended:+, }$n ranks at ${cpr[$n]} cores a rank"
  done
  [[ -n $contended ]] && host+="; contended ($contended): fewer than 4 cores a rank (compute + Gloo's threads), collectives stall beyond what the model sees (docs/predict.md \"Out of sample\")"
fi
echo "$host" >&2
longest=0 rounds=0 loads=()
for r in $(seq "$ROUNDS"); do
  if ((BUDGET_S > 0 && r > 1 && SECONDS + longest + 20 > BUDGET_S)); then
    echo "round $r not started: ${SECONDS} s gone, the longest round took ${longest} s, BUDGET_S=$BUDGET_S" >&2
    break
  fi
  t0=$SECONDS
  load=$(cut -d' ' -f1 /proc/loadavg)
  for n in $RANKS; do
    all=$(cpus 0 $((n * cpr[$n])))
    # The collectives' fit: a benchmark each round, all rounds' points in one
    # fit; with the compute a collective costs the backward it overlaps
    # (--interference: compute loops alone and beside the collectives).
    inter=()
    ((INTERFERENCE > 0)) && inter=(--interference "$INTERFERENCE")
    must "bench allreduce, $n ranks, round $r" on "$all" "$BIN" bench allreduce --device cpu --ranks "$n" --sizes "$SIZES" \
      --iters 10 --warmup 2 "${inter[@]}" --json >"$OUT/bench$n-$r.json" 2>"$OUT/bench$n-$r.log"
    # The collectives beside compute: each rank with one busy thread (the
    # study's threads per rank) sharing its CPU with Gloo, as a rank's
    # backward does with the collectives it overlaps (predict --fit-beside).
    # Not with the stretch calibration (BESIDE=0, its default then): the
    # calibration times the trial's own buckets beside its backward.
    if ((BESIDE)); then
      must "bench allreduce --beside 1, $n ranks, round $r" on "$all" "$BIN" bench allreduce --device cpu --ranks "$n" \
        --sizes "$SIZES" --iters 10 --warmup 2 --beside 1 --json >"$OUT/beside$n-$r.json" 2>"$OUT/beside$n-$r.log"
    fi
    # The one-rank inputs: N copies at once, each a world of one, sharing the
    # host as the N ranks will (predict --concurrent-inputs), on the N-rank
    # run's cores.
    pids=()
    sampling "$OUT/sched-one$n-$r.txt"
    for k in $(seq "$n"); do
      start "$all" "$BIN" run "$STUDY" --out "$OUT/one$n" --run-id "one$n-$r-$k" \
        --repeats 1 --predict "$n" --fit "$OUT/bench$n-$r.json" >"$OUT/one$n-$r-$k.log" 2>&1
      pids+=($!)
    done
    for k in "${!pids[@]}"; do
      must "run --predict $n, copy $((k + 1)), round $r (log $OUT/one$n-$r-$((k + 1)).log)" wait "${pids[$k]}"
    done
    sampled
    # The stretch calibration: every trial once more as a world of one whose
    # buckets, every other step, go to a Gloo group of N (the other ranks
    # helper threads that only communicate), on the N-rank run's cores.
    if ((SHADOW)); then
      sampling "$OUT/sched-cal$n-$r.txt"
      must "run --predict $n --interfere gloo, round $r (log $OUT/cal$n-$r.log)" on "$all" "$BIN" run "$STUDY" \
        --out "$OUT/cal$n" --run-id "cal$n-$r" --repeats 1 --steps "$CAL_STEPS" --predict "$n" --fit "$OUT/bench$n-$r.json" \
        --interfere gloo >"$OUT/cal$n-$r.log" 2>&1
      sampled
    fi
    sampling "$OUT/sched-r$n-$r.txt"
    must "run --ranks $n, round $r (log $OUT/r$n-$r.log)" on "$all" "$BIN" run "$STUDY" --out "$OUT/r$n" --run-id "r$n-$r" \
      --ranks "$n" --repeats "$REPEATS" >"$OUT/r$n-$r.log" 2>&1
    sampled
  done
  rounds=$r
  loads+=("$load")
  ((SECONDS - t0 > longest)) && longest=$((SECONDS - t0))
  echo "round $r done in $((SECONDS - t0)) s (load at its start $load)" >&2
done
status=0 incomplete="" # incomplete: the Ns whose validation lacks a trial on one side
{
  echo "| ranks | trial | predicted | measured | error | in band |"
  echo "|---|---|---|---|---|---|"
} >"$OUT/table.md"
: >"$OUT/summary.md"
for n in $RANKS; do
  against=$(printf "$OUT/r$n/$sname/r$n-%s," $(seq "$rounds"))
  fits=$(printf "$OUT/bench$n-%s.json," $(seq "$rounds"))
  besides=()
  ((BESIDE)) && besides=(--fit-beside "$(printf "$OUT/beside$n-%s.json," $(seq "$rounds") | sed 's/,$//')")
  cal=()
  ((SHADOW)) && cal=(--kappa auto "$OUT/cal$n/$sname"/cal*)
  must "predict $n ranks" on "$(cpus 0 "$need")" "$BIN" predict "$OUT/one$n/$sname"/one* "${cal[@]}" --gpus "$n" \
    --fit "${fits%,}" "${besides[@]}" --against "${against%,}" \
    --concurrent-inputs --out "$OUT" --json >"$OUT/predicted$n.json"
  # The same runs predicted other ways, for comparison (not the verdict):
  # each rank drawn from a launch of its own (--launch-per-rank), every
  # collective at its calibrated median (--collective-draws=false, the model
  # before the twenty-first session), without the stretch calibration, and
  # with the matmul loop's stretch.
  variants=(perrank)
  ((SHADOW)) && variants+=(medians plain)
  ((INTERFERENCE > 0)) && variants+=(loop)
  for var in "${variants[@]}"; do
    extra=()
    [[ $var == loop ]] && extra=(--fit-stretch "${fits%,}")
    [[ $var == perrank ]] && extra=("${cal[@]}" --launch-per-rank)
    [[ $var == medians ]] && extra=("${cal[@]}" --collective-draws=false)
    mkdir -p "$OUT/$var$n"
    must "predict $n ranks ($var)" on "$(cpus 0 "$need")" "$BIN" predict "$OUT/one$n/$sname"/one* \
      --gpus "$n" --fit "${fits%,}" "${besides[@]}" "${extra[@]}" --against "${against%,}" --concurrent-inputs \
      --out "$OUT/$var$n" --json >"$OUT/predicted$n-$var.json"
    "$PY" - "$OUT/predicted$n-$var.json" "$n" "$var" >>"$OUT/compare.md" <<'EOF' || die "reading $OUT/predicted$n-$var.json"
import json, sys
v = json.load(open(sys.argv[1]))["validation"]
what = {"plain": "without the stretch calibration", "loop": "with the matmul loop's stretch (--fit-stretch) instead",
        "perrank": "each rank drawn from a launch of its own (--launch-per-rank)",
        "medians": "every collective at its calibrated median (--collective-draws=false)"}[sys.argv[3]]
errs = ", ".join(f"{c['changed']} {100 * c['error']:+.1f}%" for c in v["checks"])
print(f"{what} (the same runs), {sys.argv[2]} ranks: median |error| {100 * v['median_abs_error']:.1f}%, "
      f"best {'same' if v['same_best'] else 'different'} ({errs})")
EOF
  done
  # Where the N-rank step goes (measurement only, not the verdict).
  "$PY" scripts/predict-decompose.py "$OUT" "$n" >"$OUT/decompose$n.md" 2>"$OUT/decompose$n.err" ||
    echo "scripts/predict-decompose.py $OUT $n failed (not the verdict): $(tail -c 300 "$OUT/decompose$n.err")" | tee -a "$OUT/decompose$n.md" >&2
  # The table's rows, the summary line and the verdict (exit 10: not met).
  rc=0
  "$PY" - "$OUT/predicted$n.json" "$n" "$OUT/table.md" "$OUT/summary.md" <<'EOF' || rc=$?
import json, sys
path, n, table, summary = sys.argv[1:]
v = json.load(open(path))["validation"]
with open(table, "a") as t:
    for c in v["checks"]:
        t.write(f"| {n} | {c['changed']} | {c['predicted_step_ms']:.2f} ms | {c['measured_step_ms']:.2f} ms | "
                f"{100 * c['error']:+.1f}% | {str(c['in_band']).lower()} |\n")
name = {c["id"]: c["changed"] for c in v["checks"]}
best = lambda i: f"{i} {name[i]}" if name.get(i, "").startswith("(") else f"{i} ({name.get(i, '?')})"
decided = v.get("winner_decidable", False)
with open(summary, "a") as s:
    s.write(f"{n} ranks: median |error| {100 * v['median_abs_error']:.1f}%, best predicted {best(v['predicted_best'])}, "
            f"measured {best(v['measured_best'])} ({'same' if v['same_best'] else 'different'}"
            f"{'' if decided else '; winner not decidable by the measurement'})\n")
    for line in v.get("separations") or []:
        s.write(f"  measured best against {line}\n")
    for p in json.load(open(path))["predictions"]:
        c = p.get("kappa_calibration")
        if c:
            control = "" if p["overlap"] else " (overlap off: no collective beside its backward, the method's control: 1 expected)"
            s.write(f"  stretch calibration {name.get(p['id'], p['id'])}: backward {c['backward_ms']:.1f} ms clean, "
                    f"{c['loaded_backward_ms']:.1f} ms beside its collectives on {c.get('shadow_ranks', '?')} ranks (medians); "
                    f"ratio {c['ratio']:.3f}, the median over {c['steps']} loaded steps each against the clean ones beside it "
                    f"({c.get('launches', '?')} launches); kappa {c['kappa']:.3f}{control}\n")
# Incomplete (a trial predicted but not measured, or measured but not
# predicted, or none both): no verdict rests on it (3, not judged).
missing = []
if not v["checks"]:
    missing.append("no trial both predicted and measured")
if v.get("unmatched"):
    missing.append("no measurement for " + ", ".join(v["unmatched"]))
if v.get("measured_only"):
    missing.append("no prediction for the measured " + "; ".join(v["measured_only"]))
if missing:
    with open(summary, "a") as s:
        s.write(f"{n} ranks: not judged: {'; '.join(missing)}\n")
    sys.exit(12)
if v["median_abs_error"] > 0.10 or (decided and not v["same_best"]):
    sys.exit(10)  # 1: an error
sys.exit(0 if decided else 11)
EOF
  case $rc in
    0) ;;
    10) status=1 ;;
    11) ((status == 1 || status == 3)) || status=4 ;;
    12) incomplete+=" $n"; ((status == 1)) || status=3 ;;
    *) die "reading $OUT/predicted$n.json: exit $rc" ;;
  esac
done
# One round is one launch a trial: no verdict rests on it (exit 3, not judged).
((rounds >= 2 || ROUNDS < 2)) || status=3
{
  echo "$host"
  echo "rounds: $rounds of ROUNDS=$ROUNDS$( ((BUDGET_S > 0)) && echo " (BUDGET_S=$BUDGET_S)"), $REPEATS N-rank launch(es) a trial each, loads at their starts: ${loads[*]}; load $(cut -d' ' -f1-3 /proc/loadavg) at the end; ${SECONDS} s"
  echo "study $STUDY"
  # build/gpu/COMMIT where make gpu-tests wrote it (a device machine's copy of
  # the tree may carry another HEAD than the commit it was built from).
  if [[ -f build/gpu/COMMIT ]]; then
    echo "commit $(cut -c1-7 build/gpu/COMMIT) (build/gpu/COMMIT)"
  else
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || "$BIN" --version 2>/dev/null | head -1)"
  fi
  cat "$OUT/compare.md"
  if ((status == 3)) && [[ -n $incomplete ]]; then
    echo "verdict: not judged: at${incomplete} ranks a trial was predicted but not measured, or measured but not predicted (above)"
  elif ((status == 3)); then
    echo "verdict: not judged: $rounds round (one launch a trial) before BUDGET_S ran out; at least 2 are needed"
  elif ((status == 0)); then
    echo "verdict: the bar is met (median |error| <= 10% and the same best trial at every N, each winner decided by the measurement)"
  elif ((status == 4)); then
    echo "verdict: winner not decidable by the measurement at some N (its trials are not separated); the error bar is met and every decided winner was predicted: not judged on the winner"
  else
    echo "verdict: the bar is NOT met"
  fi
  # A met (or not-judged) bar on a contended host is the host's as much as the model's.
  if [[ -n $contended ]] && ((status == 0 || status == 4)); then
    echo "caveat: a contended host ($contended, fewer than 4 needed): collectives stall beyond what the model sees, so this verdict is of the host too (docs/predict.md \"Out of sample\")"
  fi
} >>"$OUT/summary.md"
cat "$OUT/table.md" && echo && cat "$OUT/summary.md"
exit $status
