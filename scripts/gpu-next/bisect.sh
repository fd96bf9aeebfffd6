# Call BISECT (scripts/gpu-next/README.md): which commit between ed0acf6 and 7242a59 made GPT-2
# 4.5-6% slower (docs/perf.md "Twenty-third session"), for when lib.sh finds 7242a59 slow
# without its cuDNN link too. Builds each engine tree under ab/ (ab/COMMIT/engine/native), all at
# once, then times GPT-2 124M 16 x 1024 bf16 with graphs and native (CASESTUDY_KERNELS=native)
# for each, ROUNDS rounds in turn (cs_bench.py: 5 warm-up, 20 measured steps, CUDA events).
# Before the call, here, e.g.:
#   for c in ed0acf6 a7337fd 56c5ad2 f2539e9 7242a59; do mkdir -p ab/$c &&
#     git archive $c engine/native | tar x -C ab/$c; done
# (ab/ is ignored: carry it with .gloo). ~6 min for five trees. OUT is the run tool's.
set -u
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
trees=(ab/*/)
((${#trees[@]})) || { echo "no trees under ab/" >&2; exit 2; }
jobs=$((16 / ${#trees[@]})); ((jobs >= 2)) || jobs=2
for t in "${trees[@]}"; do
  c=$(basename "$t")
  (bash scripts/gpu-next/build-tree.sh "$t/engine/native" "build/ab-$c" "$jobs" >"$OUT/build-$c.log" 2>&1
    echo "$c build rc=$? at $SECONDS s") &
done
wait
CFG='{"family":"gpt","preset":"124m","micro_batch":16,"seq_len":1024,"device":"cuda","precision":"bf16","seed":1'
for r in $(seq "${ROUNDS:-2}"); do
  for t in "${trees[@]}"; do
    c=$(basename "$t") lib=$PWD/build/ab-$c/libcasestudy_engine.so
    [[ -f $lib ]] || continue
    ((SECONDS > 540)) && { echo "round $r stopped at $SECONDS s"; break 2; }
    for v in graphs native; do
      cfg="$CFG}" env=""
      [[ $v == graphs ]] && cfg="$CFG,\"graphs\":true}"
      [[ $v == native ]] && env="CASESTUDY_KERNELS=native"
      env $env timeout 60 python3 engine/native/tools/cs_bench.py --lib "$lib" --name "$c-$v-r$r" --config "$cfg" \
        --warmup 5 --steps 20 >>"$OUT/bench.jsonl" 2>>"$OUT/bench.err"
    done
  done
done
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys, collections
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if "step_ms" in d:
        c, v, _ = d["name"].rsplit("-", 2)
        by[(c, v)].append((d["step_ms"]["median"], d["loss_first"], d.get("cudnn_runtime")))
for (c, v), xs in sorted(by.items()):
    print(f"{c:10s} {v:7s} " + "  ".join(f"{ms:.2f} ms" for ms, _, _ in xs) + f"   first loss {xs[0][1]:.6f}  cuDNN {xs[0][2]}")
PY
echo "end at $SECONDS s"
