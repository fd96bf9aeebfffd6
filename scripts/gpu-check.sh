#!/usr/bin/env bash
# gpu-check.sh: everything the GPU machine is needed for, in one call, from the
# repository root (the machine has torch, CUDA, NCCL; it has no Go):
#   1. facts: GPU, driver, torch, CUDA, NCCL, compilers, the commit;
#   2. builds the engine against the image's torch (CMake + Ninja, precompiled
#      headers; falls back to CS_TORCH_MODE=manual if Torch's CMake config fails);
#   3. runs the Go test binaries built on the CPU machine (`make gpu-tests` puts
#      them in build/gpu/*.test) with CASESTUDY_GPU_TESTS=1;
#   4. times gpt 124m at micro-batch 16 x 1024 tokens through the engine (fp32,
#      tf32, bf16, bf16 + CUDA graphs, fp16) and the PyTorch reference
#      (bench/reference/gpt2_hf.py, eager and torch.compile) on the same GPU;
#   5. prints a table last. Logs and JSON results go to $OUT (default build/gpu-out).
#   6. with COMPARE=1, also bench/reference/compare.sh (BERT and ResNet-50 against
#      their references).
# Environment: OUT, ENGINE_BUILD (default build/engine), JOBS (default 16), STEPS (measured steps, default 20),
# SKIP_TESTS=1, TEST_RUN=<regexp> (-test.run for every binary, e.g. GPU),
# SKIP_BENCH=1, SKIP_REFERENCE=1, COMPARE=1.
# Exit status: 0 when the build and every test passed, 1 otherwise (benchmark
# failures are reported in the table and logs).
set -uo pipefail

OUT=${OUT:-$PWD/build/gpu-out}
JOBS=${JOBS:-16}
STEPS=${STEPS:-20}
LOG=$OUT/logs
mkdir -p "$LOG"
export PATH=/usr/local/cuda/bin:$PATH
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
PY=${PYTHON:-python3}
BUILD_DIR=${ENGINE_BUILD:-build/engine}
LIB=$PWD/$BUILD_DIR/libcasestudy_engine.so
status=0

say() { printf '\n== %s\n' "$*"; }

# ---- 1. facts ----------------------------------------------------------------
say "facts"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  nvcc --version | tail -1
  cmake --version | head -1
  g++ --version | head -1
  $PY - <<'EOF'
import os, torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
      "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)
try:
    print("nccl", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("nccl ?", e)
try:
    import transformers
    print("transformers", transformers.__version__)
except Exception as e:
    print("transformers missing", e)
EOF
} 2>&1 | tee "$LOG/facts.txt"

# ---- 2. build ----------------------------------------------------------------
say "build engine"
build() {
  cmake -S engine/native -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" &&
    cmake --build "$BUILD_DIR" -j "$JOBS"
}
t0=$(date +%s)
if ! build >"$LOG/build.log" 2>&1; then
  echo "CMake with Torch's config failed (see logs/build.log); retrying with CS_TORCH_MODE=manual"
  rm -rf "$BUILD_DIR"
  if ! build -DCS_TORCH_MODE=manual >"$LOG/build-manual.log" 2>&1; then
    tail -40 "$LOG/build-manual.log"
    echo "engine build failed"
    exit 1
  fi
fi
echo "built $LIB in $(( $(date +%s) - t0 )) s"
grep -E "^-- casestudy" "$LOG"/build*.log | sed 's/^[^:]*://' | sort -u
$PY - "$LIB" <<'EOF' | tee "$LOG/build-info.json"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
out, err = ctypes.create_string_buffer(1 << 16), ctypes.create_string_buffer(4096)
lib.cs_build_info.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
st = lib.cs_build_info(out, len(out), err, len(err))
print(out.value.decode() if st == 0 else "cs_build_info failed: " + err.value.decode())
EOF

# ---- 3. Go test binaries -----------------------------------------------------
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  say "Go test binaries (build/gpu/*.test)"
  shopt -s nullglob
  tests=(build/gpu/*.test)
  [ ${#tests[@]} -eq 0 ] && echo "none found: run 'make gpu-tests' on the CPU machine first"
  for t in "${tests[@]}"; do
    n=$(basename "$t" .test)
    # Run each binary in its package folder (tests read testdata/ relative to it).
    dir=$(find . -path ./build -prune -o -type d -name "$n" -print | head -1)
    [ -z "$dir" ] && dir=.
    if (cd "$dir" && CASESTUDY_GPU_TESTS=1 CASESTUDY_ENGINE_LIB=$LIB "$OLDPWD/$t" -test.count=1 -test.v -test.timeout=20m ${TEST_RUN:+-test.run "$TEST_RUN"}) \
      >"$LOG/test-$n.log" 2>&1; then
      echo "ok    $n"
    else
      echo "FAIL  $n (logs/test-$n.log)"; tail -20 "$LOG/test-$n.log"; status=1
    fi
  done
fi

# ---- 4. benchmarks -----------------------------------------------------------
results=$OUT/bench.jsonl
: >"$results"
bench_engine() { # name, extra config fields
  local name=$1 extra=$2
  local cfg="{\"family\":\"gpt\",\"preset\":\"124m\",\"micro_batch\":16,\"seq_len\":1024,\"device\":\"cuda\",\"seed\":1$extra}"
  if $PY engine/native/tools/cs_bench.py --lib "$LIB" --name "$name" --config "$cfg" \
    --warmup 5 --steps "$STEPS" >"$LOG/bench-$name.json" 2>"$LOG/bench-$name.err"; then
    cat "$LOG/bench-$name.json" >>"$results"
  else
    echo "bench $name failed: $(cat "$LOG/bench-$name.json" "$LOG/bench-$name.err" | tail -5)"
  fi
}
bench_ref() { # name, flags
  local name=$1; shift
  if $PY bench/reference/gpt2_hf.py --micro-batch 16 --seq-len 1024 --steps "$STEPS" "$@" \
    >"$LOG/bench-$name.json" 2>"$LOG/bench-$name.err"; then
    tail -1 "$LOG/bench-$name.json" >>"$results"
  else
    echo "reference $name failed: $(tail -5 "$LOG/bench-$name.err")"
  fi
}
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  say "benchmarks: gpt 124m, micro-batch 16 x 1024 tokens, $STEPS measured steps"
  bench_engine engine-fp32 ',"precision":"fp32"'
  bench_engine engine-tf32 ',"precision":"tf32"'
  bench_engine engine-bf16 ',"precision":"bf16"'
  bench_engine engine-bf16-graphs ',"precision":"bf16","graphs":true'
  bench_engine engine-fp16-graphs ',"precision":"fp16","graphs":true'
  if [ "${SKIP_REFERENCE:-0}" != 1 ]; then
    bench_ref hf-eager
    bench_ref hf-compile --compile
  fi

  # ---- 5. table --------------------------------------------------------------
  say "results (median step; ratios against the reference in the same run)"
  $PY - "$results" <<'EOF' | tee "$OUT/table.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ref = {r["name"]: r["tokens_per_s"] for r in rows if r["name"].startswith("hf-")}
print("| run | step ms (p10-p90) | tokens/s | TFLOP/s | MFU | fwd/bwd/opt ms | peak GiB | vs hf-eager | vs hf-compile |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    s = r["step_ms"]
    ph = r.get("eager_phase_ms")
    phs = "%.1f/%.1f/%.1f" % (ph["forward_ms"], ph["backward_ms"], ph["optimizer_ms"]) if ph else "-"
    ratio = lambda k: "%.2fx" % (r["tokens_per_s"] / ref[k]) if k in ref else "-"
    print("| %s | %.1f (%.1f-%.1f) | %.0f | %.1f | %.1f%% | %s | %.1f | %s | %s |" % (
        r["name"], s["median"], s["p10"], s["p90"], r["tokens_per_s"], r["tflops"],
        100 * r["mfu"], phs, r["mem_peak_bytes"] / 2**30, ratio("hf-eager"), ratio("hf-compile")))
EOF
fi

if [ "${COMPARE:-0}" = 1 ] && [ -x bench/reference/compare.sh ]; then
  say "BERT and ResNet-50 against their references (bench/reference/compare.sh)"
  bench/reference/compare.sh "$LIB" "$OUT/compare" >"$LOG/compare.log" 2>&1 ||
    echo "compare.sh failed (logs/compare.log)"
  tail -20 "$LOG/compare.log"
fi
exit $status
