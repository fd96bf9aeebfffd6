#!/usr/bin/env bash
# selftest.sh: checks scripts/gpu-check.sh's bookkeeping on a CPU machine in
# about a minute: the time budget, timeouts, skips, failures, the JSON lines,
# the tables and the profile stage. The engine runs for real (the CPU build;
# GPT configurations are turned into the tiny preset on the CPU), the
# references are stand-ins: GPT's two print an eager and a compiled line (and
# writes a made-up profile for --profile), BERT's hangs until its timeout, and
# the engine's CUDA configurations of BERT fail (no CUDA in a CPU build). A
# second run checks the profile stage: the engine's GPT profile is real where a
# python with torch is (Debian's python3-torch), else a file that says so.
#
# usage: bench/reference/selftest.sh [ENGINE_LIB]   (default build/engine/libcasestudy_engine.so)
# Exit status: 0 ok, 1 a check failed, 2 no engine library.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=${1:-$root/build/engine/libcasestudy_engine.so}
[[ -f $lib ]] || { echo "selftest.sh: no engine library at $lib (make engine)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # DESCRIPTION COMMAND...
  if "${@:2}" >/dev/null 2>&1; then echo "ok    $1"; else echo "FAIL  $1"; fail=1; fi
}

cat >"$tmp/py" <<'EOF'
#!/usr/bin/env bash
# Stand-in python for gpu-check.sh: real python except for the references.
case "${1:-}" in
  engine/native/tools/cs_bench.py)
    args=()
    for a in "$@"; do
      if [[ $a == '{"family":"gpt"'* ]]; then
        a=$(python3 -c 'import json, sys; c = json.loads(sys.argv[1]); c.update(device="cpu", preset="tiny", seq_len=64, threads=1, graphs=False); print(json.dumps(c))' "$a")
      fi
      args+=("$a")
    done
    py=python3
    [[ " $* " == *" --profile "* ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null && py=/usr/bin/python3
    exec "$py" "${args[@]}" ;;
  bench/reference/gpt2_hf.py | bench/reference/gpt2_nano.py)
    modes="eager compile" pre=hf
    [[ $1 == *nano* ]] && pre=nano
    [[ " $* " == *" --mode eager "* ]] && modes=eager
    for m in $modes; do
      echo "{\"name\": \"$pre-$m\", \"model\": \"gpt-124m\", \"precision\": \"bf16\", \"step_ms\": {\"median\": 10, \"p10\": 9, \"p90\": 11}, \"samples_per_s\": 100, \"tokens_per_s\": 6400, \"tflops\": 1, \"peak_tflops\": 989.4, \"mfu\": 0.001, \"mem_peak_bytes\": 1, \"loss_first\": 5, \"loss_last\": 4}"
    done
    prev=
    for a in "$@"; do
      [[ $prev == --profile ]] && python3 -c '
import json, sys
sys.path.insert(0, "bench/reference")
import kernels
p = kernels.summarize([("nvjet_tst_192x192", 18000, 36), ("flash_fwd_kernel", 6000, 36)], 3, step_ms=10.0)
json.dump(dict(p, name=sys.argv[2]), open(sys.argv[1], "w"))' "$a" "$pre-eager"
      prev=$a
    done ;;
  bench/reference/bert_hf.py) exec sleep 1000 ;;
  *) exec python3 "$@" ;;
esac
EOF
chmod +x "$tmp/py"

cd "$root" || exit 2
# Estimates at a tenth: GPT's references fit (7 s), BERT's hang until their
# timeout (twice the estimate, or what is left), BERT-512 and ResNet-50 find
# too little time for some runs.
OUT=$tmp/out WORK=$tmp/work PYTHON=$tmp/py ENGINE_LIB=$lib BUDGET_S=30 RESERVE_S=5 EST_SCALE=10 \
  WARMUP=1 STEPS=3 STAGES="gpt bert128 bert512 resnet50" scripts/gpu-check.sh >"$tmp/log" 2>&1
rc=$?
check "exit status 0 (benchmark failures are reported, not fatal): got $rc" test "$rc" = 0
check "table.md, bench.jsonl, logs.tgz in OUT" test -s "$tmp/out/table.md" -a -s "$tmp/out/bench.jsonl" -a -s "$tmp/out/logs.tgz"
check "every bench.jsonl line is JSON with a group" python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows and all(r.get("group") for r in rows), rows' "$tmp/out/bench.jsonl"
t=$tmp/out/table.md
check "engine GPT runs measured" grep -qE '^\| engine-bf16-graphs \| bf16 \| [0-9.]+ \(' "$t"
check "summary row with ratios to both best references, named" grep -qE '^\| gpt-124m 16x1024 \| engine-[a-z0-9-]+ \| [0-9]+ \| .* \| [0-9.]+× \((nano|hf)-eager\) \| .* \| [0-9.]+× \((nano|hf)-compile\) \|' "$t"
check "engine failure reported" grep -q 'engine-bf16 | | failed: cs_create status' "$t"
check "hung reference reported as timeout" grep -q 'hf-eager | | timeout: killed by the time limit' "$t"
check "runs that do not fit reported as skipped" grep -qE '(hf|tv)-compile \| \| skipped: needs' "$t"
check "within the budget" python3 -c 'import re, sys; s = int(re.search(r", (\d+) s of BUDGET_S=30", open(sys.argv[1]).read()).group(1)); assert s <= 30, s' "$t"
check "logs.tgz has the logs" sh -c "tar tzf '$tmp/out/logs.tgz' | grep -q logs/gpt-nano.out"
check "the table is printed last" sh -c "tail -3 '$tmp/log' | grep -q 'peak memory of a graph replay'"
OUT=$tmp/dry WORK=$tmp/dry DRY_RUN=1 RUN_STUDY=1 scripts/gpu-check.sh >"$tmp/plan" 2>&1
check "DRY_RUN plans every stage and writes nothing" sh -c "grep -q 'bert-large 32x512' '$tmp/plan' && grep -q 'study' '$tmp/plan' && ! test -e '$tmp/dry'"

# The profile stage alone: GPT's engine and stand-in profiles, BERT's engine
# fails (no profile) and its reference times out, ResNet-50's reference fails.
OUT=$tmp/pout WORK=$tmp/pwork PYTHON=$tmp/py ENGINE_LIB=$lib BUDGET_S=40 RESERVE_S=5 EST_SCALE=10 \
  STAGES=profile scripts/gpu-check.sh >"$tmp/plog" 2>&1
rc=$?
t=$tmp/pout/table.md
check "profile stage: exit status 0: got $rc" test "$rc" = 0
check "profile stage: a Kernel profiles section per shape" sh -c "grep -q '^## Kernel profiles' '$t' &&
  test \$(grep -c '^### .* vs ' '$t') = 3"
check "profile stage: GPT side by side" grep -q '^### gpt-124m 16x1024: engine-bf16 vs nano-eager' "$t"
check "profile stage: the stand-in's categories" grep -qE '^\| gemm/matmul \| [0-9.–]+ \| .* \| 6\.00 \| 75\.0% \|' "$t"
check "profile stage: the failed engine run has no profile" grep -q '^- engine: no profile' "$t"
check "profile stage: the hung reference is a timeout" grep -q 'hf-eager | | timeout: killed by the time limit' "$t"
check "profile stage: no profile group in the summary" sh -c "! grep -q '^| profile ' '$t'"
check "profile stage: profiles.tgz has the JSON" sh -c "tar tzf '$tmp/pout/profiles.tgz' | grep -q profiles/gpt-engine-bf16.json &&
  tar tzf '$tmp/pout/profiles.tgz' | grep -q profiles/gpt-nano-eager.json"
check "profile stage: the engine's profile has its matmuls (or says torch is missing)" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
if "error" in p:
    assert "needs torch" in p["error"], p["error"]
else:
    assert {"aten::mm", "aten::addmm"} & {k["name"] for k in p["top"]}, p["top"]' "$tmp/pwork/profiles/gpt-engine-bf16.json"
/usr/bin/python3 -c 'import torch' 2>/dev/null || echo "note  no python with torch here: the engine's profile only says so (apt-get install python3-torch)"
if ((fail)); then
  echo "--- gpu-check.sh output"
  cat "$tmp/log"
  echo "--- gpu-check.sh output, profile stage"
  cat "$tmp/plog"
fi
exit "$fail"
