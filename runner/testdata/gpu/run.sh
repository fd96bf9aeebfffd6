#!/bin/bash
# Runner check on the GPU machine: build the engine against the image's torch,
# then run the smoke study, precision x graphs on gpt 124m, and an MPS trial
# with procs_per_gpu 2 through the casestudy binary built on the CPU machine
# (build/runner-gpu/casestudy). Results go to $OUT as one tarball + a log.
set -u
exec > >(tee "$OUT/gpu-run.log") 2>&1
date -u; nvidia-smi -L
TP=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
t0=$(date +%s)
cmake -S engine/native -B build/gpu-engine -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP" >/dev/null &&
  cmake --build build/gpu-engine -j 16 2>&1 | tail -5 || { echo "engine build failed"; exit 1; }
echo "engine built in $(( $(date +%s) - t0 )) s"
export CASESTUDY_ENGINE_LIB=$PWD/build/gpu-engine/libcasestudy_engine.so
export PATH=$PATH:/usr/local/nvidia/bin
CS=build/runner-gpu/casestudy
$CS doctor --out "$OUT"
# STUDIES picks what runs (default: all three); INTERRUPT names the study of the Ctrl-C check.
STUDIES=${STUDIES:-"studies/gpt/smoke.yaml runner/testdata/gpu/studies/gpt-graphs.yaml runner/testdata/gpu/studies/gpt-mps.yaml"}
INTERRUPT=${INTERRUPT:-runner/testdata/gpu/studies/gpt-graphs.yaml}
for s in $STUDIES; do
  echo "=== $s"; $CS run "$s" --out results-gpu; echo "exit $?"
done
echo "=== runner/testdata/gpu/studies/gpt-faults.yaml"
$CS run runner/testdata/gpu/studies/gpt-faults.yaml --out results-gpu --heartbeat-timeout 5s; echo "exit $?"
echo "=== Ctrl-C then --resume ($INTERRUPT)"
$CS run "$INTERRUPT" --out results-int > int.log 2>&1 &
pid=$!
until [ -s results-int/*/*/trials.jsonl ] 2>/dev/null; do sleep 0.5; done
kill -INT $pid; kill -INT $pid; wait $pid; echo "exit $? (130 expected)"; cat int.log
$CS run --resume results-int/*/* | tail -3; echo "exit $?"
mkdir -p results-gpu/resumed && cp -r results-int/*/* results-gpu/resumed/
echo "=== MPS control logs"; cat results-gpu/runner-gpu-mps/*/logs/*/mps-control.r0.log 2>/dev/null
for f in results-gpu/*/*/trials.jsonl; do
  echo "=== $f"
  python3 - "$f" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line); s = t.get("summary") or {}
    print(t["id"], {k: t["knobs"].get(k) for k in ("precision", "graphs", "mps", "procs_per_gpu", "fault.kind")},
          t["outcome"], t.get("signal"), (t.get("error") or "")[:200], "samples/s=%.1f" % s.get("samples_per_s", 0),
          "step_ms=%.2f" % s.get("step_ms_median", 0), "cv=%.3f" % s.get("step_cv", 0),
          "throttled=%s" % t.get("throttled", False),
          "gpu_samples=%d" % sum(len(r.get("gpu_samples") or []) for r in t.get("repeats") or []))
PY
done
tar czf "$OUT/results-gpu.tgz" results-gpu
