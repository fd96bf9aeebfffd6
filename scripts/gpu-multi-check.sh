#!/usr/bin/env bash
# gpu-multi-check.sh: the multi-GPU checks of issue 10, in one device call of at
# most ten minutes, on a machine with N >= 2 GPUs, from the repository root
# (that machine has torch, CUDA and NCCL, no Go: the Go binaries come built
# from the CPU machine, see docs/records/multi-gpu.md). Stages, most important first,
# each under a timeout of min(its cap, the time left):
#   build   the engine: scripts/gpu-check.sh with STAGES=' ' (build only)
#   rehearse  scripts/gpu-rehearse.sh on the studies below (ddp<G>-quick of
#           each of MODELS): every rank a process on the GPUs present,
#           host-staged, so the multi-GPU time starts from a plan that ran
#           (docs/rehearsal.md); rehearse.md and rehearse.tgz into $OUT
#   tests   build/gpu/engine.test -test.run GPUMulti with CASESTUDY_GPU_TESTS=1,
#           CASESTUDY_GPUS=N (engine/gpu_multi_test.go)
#   study   for each of MODELS (default gpt): bin/casestudy run
#           studies/MODEL/ddp<G>-quick.yaml, G the largest of 8, 4, 2 that is
#           <= N, then studies/MODEL/ddp1-quick.yaml (1 GPU)
#   bench   bin/casestudy bench allreduce --device cuda --ranks G at 1 MiB..1 GiB
#           and at the size of each study's largest bucket, in nccl-tests mode
#           (back to back, one wait; sync mode where the build has no --mode),
#           NCCL's INIT/NET lines to logs/bench-nccl.*.log; then the absolute
#           floors: on H100/H200 SXM with NVLink (multicast off), busbw at
#           1 GiB about 370 GB/s on 8 GPUs (NVIDIA/nccl-tests#212, #309) and
#           329 GB/s on 2 (the provider's nvidia-h100-x2 notes); a size
#           >= 256 MiB below 0.6x the floor fails the stage (no floor is known
#           for 4 GPUs or other models: stated, not failed)
#   transport  NCCL's channel transports, from the study runs' records
#           (ranks[].nccl_transport) and the benchmark's NCCL logs: on a host
#           whose GPUs share NVLink every intra-node channel must be P2P; SHM
#           fails, and so does no channel line at all (nothing to check)
#   numbers from the runs' trials.jsonl and the benchmark (--analyze below),
#           per model: scaling efficiency 1 -> G GPUs (samples/s per GPU at G
#           over at 1; the 1-GPU reference runs as an NCCL world of one,
#           workload.world_of_one in ddp1-quick.yaml, so it has the reducer
#           and the same host sync every step as G ranks), exposed-communication share of the step at the default
#           bucket size (with and without overlap), the largest bucket's busbw
#           against the microbenchmark's at that size
# $OUT stays flat, at most 8 files, brought up to date after every stage:
# table.md (facts, stage results, test lines, the numbers), metrics.json,
# bench.json, logs.tgz (every log), studies.tgz (the run directories,
# results/MODEL/STUDY/RUN), rehearse.md, rehearse.tgz and rehearse-logs.tgz (stage
# rehearse). The table is printed last, whatever happened.
#
# Environment: OUT (default build/gpu-multi-out), WORK (default
# build/gpu-multi-check), BUDGET_S (470), RESERVE_S (10), ENGINE_BUILD
# (build/engine), ENGINE_LIB (use this library, no build), GPUS (default
# nvidia-smi -L | wc -l), STAGES (default "build rehearse tests study bench transport"),
# MODELS (default gpt; "bert resnet50" for a second call, STAGES="build rehearse study
# bench transport"). A stage is a function stage_NAME run in STAGES' order;
# one that fails sets status=1 and the script goes on to the next.
# NVLink multicast stays off: NCCL_NVLS_ENABLE must be unset or 0 (it is
# exported as 0), TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1.
#
# scripts/gpu-multi-check.sh --analyze BENCH_JSON MODEL=RUN_G,RUN_1... prints
# the numbers' table (and writes metrics.json into $OUT) from existing run
# directories; it needs only python3; "-" stands for a missing one.
#
# Exit status: 0 when every stage run passed (build, tests, every study, the
# benchmark and its floors, the transport check); 1 otherwise; 2 bad
# environment or arguments.
set -uo pipefail
SECONDS=0
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/build/gpu-multi-out}

# analyze BENCH_JSON MODEL=RUN_G,RUN_1...: the numbers as a markdown table,
# and $OUT/metrics.json. A missing run or benchmark is "-": its numbers are then
# listed as missing.
analyze() {
  mkdir -p "$OUT"
  "$PY" - "$OUT/metrics.json" "$@" <<'EOF'
import json, os, statistics, sys

out_path, bench_path, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]

def trials(run):
    if run == "-" or not os.path.isfile(os.path.join(run, "trials.jsonl")):
        return []
    out = []
    with open(os.path.join(run, "trials.jsonl")) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a torn last line
    return out

def trial(ts, overlap):
    for t in ts:
        if t.get("outcome") == "ok" and t.get("knobs", {}).get("ddp.overlap") == overlap:
            return t
    return None

def steps(t):  # every measured step of every rank and ok repeat
    return [s for rp in t["repeats"] if rp["outcome"] == "ok" for rk in rp["ranks"] for s in rk["steps"]]

bench = None
if bench_path != "-" and os.path.isfile(bench_path):
    try:
        with open(bench_path) as f:
            bench = json.load(f)
    except ValueError as e:
        print("- bench: unreadable %s: %s" % (bench_path, e))

def numbers(run_g, run_1, notes):
    m = {}
    tg, t1 = trials(run_g), trials(run_1)
    base_g, nolap_g, base_1 = trial(tg, "true"), trial(tg, "false"), trial(t1, "true")
    if base_g and base_1:
        g = len(base_g["repeats"][0]["ranks"])
        m.update(gpus=g, samples_per_s_1=base_1["summary"]["samples_per_s"],
                 samples_per_s_g=base_g["summary"]["samples_per_s"])
        m["scaling_efficiency"] = m["samples_per_s_g"] / g / m["samples_per_s_1"]
        # the reference's backend: "nccl" when it ran as a world of one (the
        # reducer and a host sync every step, as the G-GPU run)
        info = (base_1["repeats"][0]["ranks"][0].get("info") or {}) if base_1["repeats"] else {}
        m["reference_backend"] = info.get("backend") or "none"
    else:
        notes.append("scaling efficiency: needs the ok baseline trials of both runs (%s, %s)" % (run_g, run_1))
    for name, t in (("overlap", base_g), ("no_overlap", nolap_g)):
        if not t:
            notes.append("exposed communication (%s): no ok trial in %s" % (name, run_g))
            continue
        ss = steps(t)
        m["exposed_comm_share_" + name] = statistics.median(s["exposed_comm_ms"] / s["step_ms"] for s in ss)
        m["comm_share_" + name] = statistics.median(s["comm_ms"] / s["step_ms"] for s in ss)
        m["step_ms_" + name] = statistics.median(s["step_ms"] for s in ss)
    buckets = [b for s in steps(base_g) for b in s.get("buckets") or []] if base_g else []
    if buckets:
        big = max(b["bytes"] for b in buckets)
        # the transfer's busbw (least time over ranks) where the runner split
        # the ranks' arrival skew off, else each rank's own
        m.update(buckets=len(steps(base_g)[0].get("buckets") or []), largest_bucket_bytes=big,
                 largest_bucket_busbw_gbs=statistics.median(b.get("transfer_busbw_gbs") or b["busbw_gbs"]
                                                            for b in buckets if b["bytes"] == big))
        if bench:
            row = min(bench["rows"], key=lambda r: abs(r["bytes"] - big))
            m.update(bench_bytes=row["bytes"], bench_busbw_gbs=row["busbw_gbs"], bench_ranks=bench["ranks"],
                     bucket_vs_bench=m["largest_bucket_busbw_gbs"] / row["busbw_gbs"] if row["busbw_gbs"] else 0)
        else:
            notes.append("largest bucket vs microbenchmark: no benchmark result")
    return m

def mib(b):
    return "%.2f MiB" % (b / 2**20)

def pct(x):
    return "%.1f %%" % (100 * x)

metrics, rows, notes = {}, [], []
for pair in pairs:
    model, _, runs = pair.partition("=")
    run_g, _, run_1 = runs.partition(",")
    mnotes = []
    m = metrics[model] = numbers(run_g, run_1 or "-", mnotes)
    m["notes"] = mnotes
    notes += ["%s: %s" % (model, n) for n in mnotes]
    if "scaling_efficiency" in m:
        rows.append((model, "scaling efficiency 1 -> %d GPUs" % m["gpus"], pct(m["scaling_efficiency"]),
                     "samples/s per GPU %.1f at %d GPUs vs %.1f at 1 (baseline trials, median of repeats; %s)"
                     % (m["samples_per_s_g"] / m["gpus"], m["gpus"], m["samples_per_s_1"],
                        "1-GPU reference: NCCL world of one, reducer on, host sync every step as at G"
                        if m["reference_backend"] == "nccl" else
                        "1-GPU reference ran without the reducer (backend %s): not a world of one, so the ratio "
                        "also holds run-ahead and reducer overhead" % m["reference_backend"])))
    for name, what in (("overlap", "ddp.overlap true"), ("no_overlap", "ddp.overlap false")):
        if "exposed_comm_share_" + name in m:
            rows.append((model, "exposed communication, %s" % what, pct(m["exposed_comm_share_" + name]),
                         "median over steps and ranks of exposed_comm_ms / step_ms (step %.1f ms; all comm %s of it)"
                         % (m["step_ms_" + name], pct(m["comm_share_" + name]))))
    if "largest_bucket_bytes" in m:
        rows.append((model, "largest bucket busbw", "%.1f GB/s" % m["largest_bucket_busbw_gbs"],
                     "%s, median over steps and ranks; %d buckets a step" % (mib(m["largest_bucket_bytes"]), m["buckets"])))
    if "bench_busbw_gbs" in m:
        rows.append((model, "bench allreduce busbw at that size", "%.1f GB/s" % m["bench_busbw_gbs"],
                     "%s, %d ranks, fp32; bucket / bench = %.2f" % (mib(m["bench_bytes"]), m["bench_ranks"], m["bucket_vs_bench"])))
with open(out_path, "w") as f:
    json.dump(metrics, f, indent=2)
print("| model | number | value | how |")
print("|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s | %s |" % r)
if notes:
    print()
for n in notes:
    print("- missing: " + n)
EOF
}

if [[ ${1:-} == --analyze ]]; then
  [[ $# -ge 3 ]] || { echo "usage: scripts/gpu-multi-check.sh --analyze BENCH_JSON MODEL=RUN_G,RUN_1... (- for a missing one)" >&2; exit 2; }
  shift
  analyze "$@"
  exit $?
elif [[ $# -gt 0 ]]; then
  echo "gpu-multi-check.sh: unknown argument '$1' (the only one is --analyze BENCH_JSON MODEL=RUN_G,RUN_1...)" >&2
  exit 2
fi

WORK=${WORK:-$PWD/build/gpu-multi-check}
BUDGET_S=${BUDGET_S:-470}
RESERVE_S=${RESERVE_S:-10}
STAGES=${STAGES:-build rehearse tests study bench transport}
MODELS=${MODELS:-gpt}
BUILD_DIR=${ENGINE_BUILD:-build/engine}
LIB=${ENGINE_LIB:-$BUILD_DIR/libcasestudy_engine.so}
[[ $LIB == /* ]] || LIB=$PWD/$LIB
LOG=$WORK/logs
# Caps (s): a stage's timeout is min(cap, time left). Estimates for 8 H200s:
# build ~70, tests ~150, the studies ~90 and ~40, the benchmark ~40.
CAP_BUILD=240 CAP_TESTS=230 CAP_STUDY_G=150 CAP_STUDY_1=80 CAP_BENCH=90
CAP_REHEARSE=${CAP_REHEARSE:-150}

export PATH=/usr/local/cuda/bin:$PATH
if [[ -n ${NCCL_NVLS_ENABLE:-} && $NCCL_NVLS_ENABLE != 0 ]]; then
  echo "gpu-multi-check.sh: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE: NVLink multicast must stay off (0)" >&2
  exit 2
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

for v in BUDGET_S RESERVE_S; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu-multi-check.sh: $v=${!v}: want a whole number" >&2; exit 2; }
done
for s in $STAGES; do
  case $s in build | rehearse | tests | study | bench | transport) ;;
    *) echo "gpu-multi-check.sh: STAGES: unknown stage '$s' (build rehearse tests study bench transport)" >&2; exit 2 ;;
  esac
done
for m in $MODELS; do
  [[ -f studies/$m/ddp1-quick.yaml ]] ||
    { echo "gpu-multi-check.sh: MODELS: no studies/$m/ddp1-quick.yaml (gpt, bert, resnet50)" >&2; exit 2; }
done
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
if [[ ! $GPUS =~ ^[0-9]+$ ]] || ((GPUS < 2)); then
  echo "gpu-multi-check.sh: GPUS=$GPUS: this needs a machine with 2 or more GPUs" >&2
  exit 2
fi
G=2 # the study's and the benchmark's GPUs: ddp2/ddp4/ddp8-quick.yaml
for g in 8 4; do ((GPUS >= g)) && { G=$g; break; }; done

rm -rf "$WORK"
mkdir -p "$OUT" "$LOG"
rm -f "$OUT"/{table.md,metrics.json,bench.json,logs.tgz,studies.tgz,rehearse.md,rehearse.tgz,rehearse-logs.tgz}
STATUS=$WORK/status.md
: >"$STATUS"
status=0
BENCH=-
declare -A RUNS # MODEL/STUDY -> run directory

say() { printf '\n== %s\n' "$*"; }
log_status() { echo "- $*" | tee -a "$STATUS"; }
left() { echo $((BUDGET_S - RESERVE_S - SECONDS)); }
min() { if (($1 < $2)); then echo "$1"; else echo "$2"; fi; }

# timed CAP LOGNAME CMD...: CMD under a timeout of min(CAP, time left), in the
# background so a signal to this script is handled at once; stdout and stderr
# to logs/LOGNAME.out and .err. Returns CMD's status (124/137: timed out).
child=
timed() {
  local t
  t=$(min "$1" "$(left)")
  local name=$2
  shift 2
  ((t >= 1)) || return 124
  timeout -k 5 "$t" "$@" >"$LOG/$name.out" 2>"$LOG/$name.err" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=
  return "$rc"
}

publish() {
  {
    echo "# gpu-multi-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $SECONDS s of BUDGET_S=$BUDGET_S, $GPUS GPUs (studies and bench on $G)"
    echo
    echo '```'
    cat "$LOG/facts.txt" 2>/dev/null
    echo '```'
    echo
    cat "$STATUS"
    echo
    echo "## Numbers (studies/MODEL/ddp$G-quick.yaml and ddp1-quick.yaml: bf16, ddp.bucket_mb 25)"
    echo
    mapfile -t pr < <(pairs)
    analyze "$BENCH" "${pr[@]}" 2>&1
    if [[ -f $WORK/bench.txt ]]; then
      echo
      echo '```'
      cat "$WORK/bench.txt"
      echo '```'
    fi
  } >"$OUT/table.md.tmp" && mv "$OUT/table.md.tmp" "$OUT/table.md"
  tar -czf "$OUT/logs.tgz" -C "$WORK" logs status.md 2>/dev/null
}
finish() {
  trap - EXIT
  publish
  say "results ($SECONDS s; $OUT: $(cd "$OUT" && echo *))"
  cat "$OUT/table.md"
  exit "$status"
}
trap finish EXIT
stopped() {
  [[ -n $child ]] && { kill -TERM "$child" 2>/dev/null; wait "$child"; }
  log_status "stopped by a signal at $SECONDS s"
  status=1
  exit
}
trap stopped INT TERM

facts() {
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  if git rev-parse HEAD >/dev/null 2>&1; then
    echo "commit $(git rev-parse HEAD)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  fi
  [[ -x bin/casestudy ]] && bin/casestudy --version 2>&1 | head -1
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  nvidia-smi topo -m
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
}

stage_build() {
  if [[ -n ${ENGINE_LIB:-} ]]; then
    log_status "build: skipped, ENGINE_LIB=$LIB"
    return
  fi
  # gpu-check.sh with no stages only builds (with its Torch-mode retry); its
  # own table and logs stay under $WORK/gpu-check.
  local rc=0
  timed "$CAP_BUILD" build env STAGES=' ' BUDGET_S="$(min "$CAP_BUILD" "$(left)")" RESERVE_S=0 \
    ENGINE_BUILD="$BUILD_DIR" OUT="$WORK/gpu-check/out" WORK="$WORK/gpu-check" scripts/gpu-check.sh || rc=$?
  if ((rc == 0)) && [[ -f $LIB ]]; then
    log_status "build: ok in $SECONDS s ($(grep -m1 'build: ok' "$LOG/build.out" | sed 's/^- //'))"
  else
    log_status "build: FAIL (exit $rc; logs/build.out, gpu-check/logs/)"
    tail -30 "$LOG/build.out"
    status=1
  fi
  cp -r "$WORK/gpu-check/logs" "$LOG/gpu-check" 2>/dev/null
}

stage_tests() {
  local bin=$PWD/build/gpu/engine.test rc=0 tl
  if [[ ! -x $bin ]]; then
    log_status "tests: FAIL, no build/gpu/engine.test (on the CPU machine: go test -c -o build/gpu/engine.test ./engine/binding; carry build/gpu)"
    status=1
    return
  fi
  tl=$(min "$CAP_TESTS" "$(left)")
  timed "$tl" tests env -C engine CASESTUDY_GPU_TESTS=1 CASESTUDY_GPUS="$GPUS" CASESTUDY_ENGINE_LIB="$LIB" "$bin" \
    -test.count=1 -test.v -test.timeout=$((tl > 10 ? tl - 5 : tl))s -test.run GPUMulti || rc=$?
  if ((rc == 0)); then
    log_status "tests: ok in $SECONDS s"
  else
    log_status "tests: FAIL (exit $rc, logs/tests.out)"
    tail -40 "$LOG/tests.out"
    status=1
  fi
  {
    echo
    echo '```'
    grep -E '^\s*--- (PASS|FAIL|SKIP)|^(panic|FAIL|ok|PASS)' "$LOG/tests.out"
    echo '```'
  } >>"$STATUS"
}

# outcomes TRIALS_JSONL: "id outcome tokens/s" of each planned trial.
outcomes() {
  "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    try:
        t = json.loads(l)
    except ValueError:
        continue
    if t.get("index", -1) >= 0:
        print("%s %s %.0f tokens/s;" % (t["id"], t["outcome"], (t.get("summary") or {}).get("tokens_per_s", 0)), end=" ")' "$1" 2>&1
}

# study MODEL NAME CAP: bin/casestudy run studies/MODEL/NAME.yaml; records the
# run directory in RUNS[MODEL/NAME] and adds it to studies.tgz.
study() {
  local model=$1 name=$2 cap=$3 rc=0 dir log="study-$1-$2"
  if [[ ! -x bin/casestudy ]]; then
    log_status "study $model/$name: FAIL, no bin/casestudy (make cli on the CPU machine; carry bin)"
    status=1
    return
  fi
  timed "$cap" "$log" bin/casestudy run "studies/$model/$name.yaml" --engine-lib "$LIB" \
    --out "$WORK/results/$model" || rc=$?
  dir=$(find "$WORK/results/$model" -mindepth 2 -maxdepth 2 -type d -path "*-$name/*" 2>/dev/null | head -1)
  if [[ -n $dir ]]; then
    RUNS[$model/$name]=$dir
    tar -czf "$OUT/studies.tgz" -C "$WORK" results
  fi
  if ((rc == 0)); then
    log_status "study $model/$name: ok, ${dir#"$WORK"/}: $(outcomes "$dir/trials.jsonl")"
  else
    log_status "study $model/$name: FAIL (exit $rc, logs/$log.err): $(tail -3 "$LOG/$log.err" | tr '\n' ' ')"
    status=1
  fi
}

# The rehearsal of the studies this call runs (scripts/gpu-rehearse.sh),
# within CAP_REHEARSE; its failure fails the call, not the later stages.
stage_rehearse() {
  local m studies="" rc=0
  for m in $MODELS; do studies="$studies studies/$m/ddp$G-quick.yaml"; done
  # The faults once, in the first study; each study's timeout comes from its
  # plan (gpu-rehearse.sh), within what is left of CAP_REHEARSE.
  local first=${studies# }
  timed "$CAP_REHEARSE" rehearse env STUDIES="$studies" FAULT_STUDIES="${first%% *}" \
    BUDGET_S="$(min "$CAP_REHEARSE" "$(left)")" GPUS="$GPUS" \
    ENGINE_LIB="$LIB" OUT="$OUT" WORK="$WORK/rehearse" scripts/gpu-rehearse.sh || rc=$?
  if ((rc == 0)); then
    log_status "rehearse: ok,$studies (rehearse.md)"
  else
    log_status "rehearse: FAIL (exit $rc, logs/rehearse.out, rehearse.md)"
    status=1
  fi
}

# pairs: MODEL=RUN_G,RUN_1 of each model, for analyze.
pairs() {
  local m
  for m in $MODELS; do echo "$m=${RUNS[$m/ddp$G-quick]:--},${RUNS[$m/ddp1-quick]:--}"; done
}

# Per model, G GPUs first (its numbers need no other run), then 1 GPU.
stage_study() {
  local m
  for m in $MODELS; do
    if (($(left) < 30)); then
      log_status "study $m: skipped, $(left) s left"
      status=1
      continue
    fi
    study "$m" "ddp$G-quick" "$CAP_STUDY_G"
    publish
    study "$m" ddp1-quick "$CAP_STUDY_1"
    publish
  done
}

# The benchmark at 1 MiB..1 GiB, and at each study's largest bucket (rounded
# up to whole fp32 values).
stage_bench() {
  local sizes=1M,2M,4M,8M,16M,32M,64M,128M,256M,512M,1G big rc=0 m run
  if [[ ! -x bin/casestudy ]]; then
    log_status "bench: FAIL, no bin/casestudy (make cli on the CPU machine; carry bin)"
    status=1
    return
  fi
  for m in $MODELS; do
    run=${RUNS[$m/ddp$G-quick]:-}
    [[ -n $run ]] || continue
    big=$("$PY" -c 'import json, sys
b = [k["bytes"] for l in open(sys.argv[1]) if l.strip().startswith("{")
     for t in [json.loads(l)] if t.get("outcome") == "ok"
     for rp in t["repeats"] for rk in rp["ranks"] for s in rk["steps"] for k in s.get("buckets") or []]
print((max(b) + 3) // 4 * 4 if b else "")' "$run/trials.jsonl" 2>/dev/null)
    [[ -n $big ]] && sizes="$sizes,$big"
  done
  local mode=()
  if bin/casestudy bench allreduce --help 2>/dev/null | grep -q -- '--mode'; then
    mode=(--mode nccl-tests)
  fi
  rm -f "$LOG"/bench-nccl.*.log
  timed "$CAP_BENCH" bench env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$LOG/bench-nccl.%h.%p.log" \
    bin/casestudy bench allreduce --engine-lib "$LIB" --device cuda --ranks "$G" "${mode[@]}" \
    --sizes "$sizes" --iters 20 --warmup 5 --timeout "$(min "$CAP_BENCH" "$(left)")s" --json || rc=$?
  if ((rc != 0)); then
    log_status "bench: FAIL (exit $rc, logs/bench.err): $(tail -3 "$LOG/bench.err" | tr '\n' ' ')"
    status=1
    return
  fi
  cp "$LOG/bench.out" "$OUT/bench.json"
  BENCH=$OUT/bench.json
  "$PY" - "$BENCH" >"$WORK/bench.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("bench allreduce: %s %s, %d ranks, %s, %s mode, %d iterations" % (
    r["backend"], r["version"], r["ranks"], r["dtype"], r.get("mode", "sync"), r["iters"]))
print("%12s %10s %12s %12s %10s" % ("bytes", "time us", "algbw GB/s", "busbw GB/s", "skew us"))
for w in r["rows"]:
    print("%12d %10.1f %12.1f %12.1f %10.1f" % (w["bytes"], w["ms"] * 1e3, w["algbw_gbs"], w["busbw_gbs"],
                                                w.get("skew_ms", 0) * 1e3))
EOF
  log_status "bench: ok, sizes $sizes on $G GPUs, ${mode[*]:-sync mode} (bench.json)"
  local verdict frc=0
  verdict=$(floors "$BENCH") || frc=$?
  if ((frc == 0)); then
    log_status "floors: ok, $verdict"
  else
    log_status "floors: FAIL, $verdict"
    status=1
  fi
}

# nvlink_host: whether nvidia-smi topo -m shows NVLink between two GPUs.
nvlink_host() {
  nvidia-smi topo -m 2>/dev/null | grep -Eq '^GPU[0-9]+.*[[:space:]]NV[0-9]+'
}

# floors BENCH_JSON: the benchmark's busbw at >= 256 MiB against the absolute
# floor for G GPUs of this model with NVLink multicast off; prints one line and
# fails (1) when a size is below 0.6x the floor. Where no floor is known it
# says so and passes.
floors() {
  local name nvlink=0
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  nvlink_host && nvlink=1
  "$PY" - "$1" "$G" "$name" "$nvlink" <<'EOF'
import json, sys
bench, g, name, nvlink = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
# busbw floors at 1 GiB, all-reduce, NVLink multicast (NVLS) off, on H100/H200
# SXM (NVLink 4 through NVSwitch; the H200 has the H100's links):
# 8 GPUs: "NCCL can get an effective NVLink bandwidth of 370GB/s" with Ring
# (NVIDIA/nccl-tests#212); 368.76 GB/s measured with NVLS disabled (#309).
# 2 GPUs: 329 GB/s at 1 GiB (the GPU provider's machine notes, nvidia-h100-x2).
FLOORS = {8: 370.0, 2: 329.0}
sxm = ("H100" in name or "H200" in name) and "PCIe" not in name and " NVL" not in name
if not (sxm and nvlink):
    print("no floor for %d x %s%s: not checked" % (g, name or "unknown GPU", "" if nvlink else " without NVLink"))
    sys.exit(0)
if g not in FLOORS:
    print("no published floor for %d GPUs of %s: not checked" % (g, name))
    sys.exit(0)
floor = FLOORS[g]
rows = [r for r in bench["rows"] if r["bytes"] >= 256 << 20]
if not rows:
    print("no size >= 256 MiB in the benchmark: nothing to hold against %.0f GB/s" % floor)
    sys.exit(1)
top = max(rows, key=lambda r: r["bytes"])
line = "%d x %s, %s mode, floor %.0f GB/s busbw (NVLS off): %d MiB at %.1f GB/s = %.2f of the floor" % (
    g, name, bench.get("mode", "sync"), floor, top["bytes"] >> 20, top["busbw_gbs"], top["busbw_gbs"] / floor)
low = [r for r in rows if r["busbw_gbs"] < 0.6 * floor]
if low:
    print(line + "; below 0.6x (%.0f GB/s): %s" % (
        0.6 * floor, ", ".join("%d MiB %.1f GB/s" % (r["bytes"] >> 20, r["busbw_gbs"]) for r in low)))
    sys.exit(1)
print(line)
EOF
}

# The transport NCCL used: every launch of the G-GPU study runs
# (ranks[].nccl_transport) and the benchmark's NCCL logs. On an NVLink host an
# SHM channel fails the stage; so does finding no channel line at all.
stage_transport() {
  local runs=() k nvlink=0 verdict rc=0
  for k in "${!RUNS[@]}"; do
    [[ $k == */ddp$G-quick ]] && runs+=("${RUNS[$k]}/trials.jsonl")
  done
  nvlink_host && nvlink=1
  verdict=$("$PY" - "$nvlink" "$LOG" "${runs[@]}" <<'EOF'
import collections, glob, json, re, sys
nvlink, logdir, runs = sys.argv[1] == "1", sys.argv[2], sys.argv[3:]
# as provenance/transport.go reads them
via = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : \d+\[[0-9a-fA-Fx]+\] -> \d+\[[0-9a-fA-Fx]+\]"
                 r"(?: \[(?:send|receive)\])? via (\S+)")

def kind(v):
    p = v.split("/")
    if p[0] == "SHM":
        return "SHM"
    return "/".join(p[:2]) if p[0] in ("P2P", "NET") and len(p) > 1 else p[0]

where = collections.OrderedDict()
for run in runs:
    for line in open(run):
        try:
            t = json.loads(line)
        except ValueError:
            continue
        for rp in t.get("repeats") or []:
            c = collections.Counter()
            for rk in rp.get("ranks") or []:
                c.update((rk.get("nccl_transport") or {}).get("connections") or {})
            if c:
                where["%s launch %d" % (t["id"], rp["repeat"])] = c
bench = collections.Counter()
for f in glob.glob(logdir + "/bench-nccl.*.log"):
    for line in open(f, errors="replace"):
        m = via.search(line)
        if m:
            bench[kind(m.group(1))] += 1
if bench:
    where["bench"] = bench
if not where:
    print("no NCCL channel line in the study runs or the benchmark: the transport is unknown")
    sys.exit(1)
text = "; ".join("%s: %s" % (w, ", ".join("%s %d" % kv for kv in sorted(c.items()))) for w, c in where.items())
bad = [w for w, c in where.items() if nvlink and c.get("SHM")]
if bad:
    print("SHM on a host whose GPUs share NVLink (%s): %s" % (", ".join(bad), text))
    sys.exit(1)
print(("every intra-node channel P2P on this NVLink host: " if nvlink else "host without NVLink: ") + text)
EOF
  ) || rc=$?
  if ((rc == 0)); then
    log_status "transport: ok, $verdict"
  else
    log_status "transport: FAIL, $verdict"
    status=1
  fi
}

say "gpu-multi-check: $GPUS GPUs, stages: $STAGES, budget $BUDGET_S s"
facts >"$LOG/facts.txt" 2>&1
cat "$LOG/facts.txt"
for s in $STAGES; do
  say "$s (at $SECONDS s, $(left) s left)"
  if [[ $s != build && ! -f $LIB ]]; then
    log_status "$s: skipped, no engine library at $LIB"
    status=1
    continue
  fi
  if (($(left) < 20)); then
    log_status "$s: skipped, $(left) s left"
    status=1
    continue
  fi
  t0=$SECONDS
  "stage_$s"
  log_status "$s: $((SECONDS - t0)) s"
  publish
done
