# Calls G, rand and ZERO2 in one (scripts/gpu-next/README.md; issues 41 and 39): resnet.fusion cudnn (g.sh) and
# the synthetic data's "rand" kernel (rand.sh), sharing one build and one ResNet-50 group at 384.
# The engine built (CMake: "cuDNN fusion"), the native suites resnet_fusion, bn_relu, kernels and
# row_random, the Go tests TestGPUResNetFusion and TestGPUFamilySteps; ResNet-50 at 384 in bf16,
# fp16, fp16 fused and bf16 without the rand kernel, with graphs, beside torchvision compiled;
# the kernel profile of the fused run at 384 (rand.sh's bf16 profile left out for time).
# With zero2.sh's suites (zero, reducer) and Go tests (TestGPUZeroGradientMemory, TestGPUZeroWorldOfOne,
# TestGPUStagedZero: issue 39) in the same tests stage.
# OUT is the run tool's: gpu-check writes its table and bench lines there as it goes (GRZ_BUDGET,
# default 550 s, for a shorter call; GRZ_STAGES, GRZ_SUITES and GRZ_TESTS choose less). Carry bin, build/gpu and .gloo.
W=/tmp/resGRZ; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; git log -1 --format=%h 2>/dev/null; cat build/gpu/COMMIT; date -u
nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
STAGES="${GRZ_STAGES:-tests resnet50-batch profile}" NATIVE_SUITES="${GRZ_SUITES:-resnet_fusion bn_relu:bn kernels row_random:rand zero reducer}" TP_HUNT=0 \
  TEST_RUN="${GRZ_TESTS:-^TestGPU(ResNetFusion|FamilySteps|ZeroGradientMemory|ZeroWorldOfOne|StagedZero)\$}" RESNET_BATCHES="384" RESNET_BATCH_FP16=1 RESNET_BATCH_FUSED=1 \
  RESNET_BATCH_OFF=rand PROFILE_MODELS="resnet50-fused" PROFILE_RESNET_MB=384 \
  EST_TESTS=${EST_TESTS:-150} CAP_TESTS=${CAP_TESTS:-280} BUDGET_S=${GRZ_BUDGET:-550} OUT=$OUT/g scripts/gpu-check.sh > $W/g.log 2>&1; echo "grz rc=$? at $SECONDS s"
grep -hE "cuDNN fusion|cuDNN 9 backend" build/gpu-check/logs/cmake*.out 2>/dev/null | head -3
grep -E '^- ' $OUT/g/table.md | cut -c1-300 | head -30
grep -E "^(ok|FAIL)|fused block|tiny step|plan |refusals" build/gpu-check/logs/native-tests-resnet_fusion.out 2>/dev/null | cut -c1-200 | head -40
cat build/gpu-check/logs/native-tests-resnet_fusion.err 2>/dev/null | head -20
grep -hE 'row_random|^FAIL|case ' build/gpu-check/logs/native-tests-row_random.out build/gpu-check/logs/native-tests-row_random.err 2>/dev/null | head -10
grep -hE -- '^\s*--- (FAIL|PASS)|^FAIL|panic|gpu_zero_mem_test.go' build/gpu-check/logs/test-*.out 2>/dev/null | cut -c1-400 | head -40
# A block cuDNN refused runs unfused and says so once: none expected.
grep -rhE "resnet.fusion: .* (runs|ran) unfused" build/gpu-check/logs 2>/dev/null | sort | uniq -c | head
grep -A19 'Top 15 of engine-' $OUT/g/table.md | cut -c1-200 | head -45
python3 - "$OUT" <<'PY'
import json, sys, tarfile
w = sys.argv[1]
try:
    with tarfile.open(f"{w}/g/profiles.tgz") as t:
        for m in t.getmembers():
            if m.name.endswith(".json") and "engine" in m.name:
                d = json.load(t.extractfile(m))
                ew = [c for c in d.get("categories", []) if c.get("category") == "elementwise"]
                print("profile", m.name, "kernel_ms", round(d["kernel_ms"], 2), "step_ms", round(d["step_ms"], 2),
                      "idle_ms", round(d["idle_ms"], 2), "elementwise", ew)
except Exception as e:
    print("profiles:", e)
for l in open(f"{w}/g/bench.jsonl"):
    r = json.loads(l)
    if "b384" in r.get("name", "") or "tv" in r.get("name", ""):
        print(r.get("name"), "step_ms", r.get("step_ms"), "wall_ms_per_step", r.get("wall_ms_per_step"), "samples/s", r.get("samples_per_s"))
PY
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; rm -f $OUT/g/logs.tgz; echo "end at $SECONDS s"
