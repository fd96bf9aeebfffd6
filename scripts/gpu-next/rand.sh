# Next call: the "rand" kernel (RowRandom in one pass; scripts/gpu-next/README.md). OUT is the
# run tool's. Carry bin, build/gpu and .gloo as for a.sh. ~5 min on a fresh H100: the build
# (~80 s), the kernels and row_random suites + TestGPUFamilySteps (~40 s), the ResNet-50 profile
# at 384 (~75 s), ResNet-50 at 384 with and without the kernel beside torchvision (~90 s).
W=/tmp/resRand; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; date -u
nvcc --version | tail -2; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="tests profile resnet50-batch" NATIVE_SUITES="kernels row_random:rand" TEST_RUN='^TestGPUFamilySteps$' \
  PROFILE_MODELS=resnet50 PROFILE_RESNET_MB=384 RESNET_BATCHES=384 RESNET_BATCH_OFF=rand \
  BUDGET_S=340 OUT=$W/a scripts/gpu-check.sh > $W/a.log 2>&1; echo "rand rc=$? at $SECONDS s"
grep -E '^- ' $W/a/table.md | cut -c1-300 | head -20
grep -hE 'row_random|^FAIL|case ' build/gpu-check/logs/native-tests-*.out build/gpu-check/logs/native-tests-*.err 2>/dev/null | head -20
# The data source's int64 kernels (BitwiseXor, AUnaryFunctor<long>, lshift, rshift, add<long>)
# should be gone from the top 15, row_random_kernel in their place; kernel_ms and idle_ms per step.
grep -A19 'Top 15 of engine-bf16' $W/a/table.md | cut -c1-200
python3 - "$W" <<'EOF'
import json, sys, tarfile
w = sys.argv[1]
with tarfile.open(f"{w}/a/profiles.tgz") as t:
    for m in t.getmembers():
        if m.name.endswith("resnet50-engine-bf16.json"):
            d = json.load(t.extractfile(m))
            ew = [c for c in d["categories"] if c["category"] == "elementwise"]
            print("profile: kernel_ms", round(d["kernel_ms"], 2), "step_ms", round(d["step_ms"], 2),
                  "idle_ms", round(d["idle_ms"], 2), "elementwise", ew)
for l in open(f"{w}/a/bench.jsonl"):
    r = json.loads(l)
    if r.get("name", "").startswith("engine-bf16-graphs-b384"):
        print(r["name"], "step_ms", r["step_ms"], "wall_ms_per_step", r.get("wall_ms_per_step"), "kernels", r.get("kernels"))
EOF
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
