# Next call bert-ln (scripts/gpu-next/README.md): issue 41 item 2, BERT-large 32 x 512's
# lnb and lny kernels (docs/perf.md, twenty-first session) and the adamc switch (the
# AdamW kernel writing the linear layers' bf16 copies, docs/perf.md). OUT is the run tool's.
W=/tmp/resBertLN; rm -rf $W; mkdir -p $W
export PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,power.limit,memory.total --format=csv,noheader; cat build/gpu/COMMIT; date -u
[[ -d .gloo/include/gloo ]] && export CS_GLOO_INCLUDE=$PWD/.gloo/include
# The build; the suites of the changed kernels (add_layer_norm: ln with lny and
# lnb at BERT-large 512's shapes; linear_act, linear_qkv: the lin kernel's
# function; kernels: the switch; adamw, adamc, linear_casts: the AdamW kernel
# writing the copies LinearCasts keeps); BERT's Go GPU tests (bf16 tracks fp32, graphs
# match eager at tiny and large, every precision); BERT-large 512 with graphs
# beside the same build without lnb, with lny (off by default since 2026-12-07g), without
# adamc, and bert_fast.py
# eager and compiled; the engine's and the compiled reference's kernel profiles;
# GPT-2's group last (its LayerNorm backward kernel changed shape, not math),
# where time is left.
STAGES="tests bert512 profile gpt" NATIVE_SUITES="add_layer_norm:ln linear_act:lin linear_qkv:qkv kernels adamw:adam adamc:adamc linear_casts:cast" \
  TEST_RUN='^TestGPU(BF16TracksFP32|FamilyGraphsMatchEager|FamilySteps)$/bert' \
  BERT_OFF="lnb adamc" BERT_ON="lny" BERT_HF=0 PROFILE_MODELS="bert512 bert512-lny" PROFILE_REF=compile \
  CAP_TESTS=150 BUDGET_S=530 OUT=$W/d scripts/gpu-check.sh > $W/d.log 2>&1; echo "d rc=$? at $SECONDS s"
grep -E '^- |^\| (engine|fast)' $W/d/table.md | cut -c1-300 | head -40
grep -hE -- '^\s*--- FAIL|^FAIL|panic' build/gpu-check/logs/test-*.out 2>/dev/null | head -20
grep -E "^(ok|FAIL)|cuda ok|FAIL" build/gpu-check/logs/native-tests-*.out | cut -c1-160
# lny with a small or zero LayerNorm weight in some columns (docs/perf.md "lny and a small
# gamma"): the errors against float64, lny's and the r path's, per CUDA case.
grep -hA1 "^  lny, w" build/gpu-check/logs/native-tests-*.out | cut -c1-240 | head -40
# Where lny's time goes (2026-12-07g: its LayerNorm kernels 1.7 ms slower): the profile with it against the default.
python3 bench/reference/profile_diff.py --tgz $W/d/profiles.tgz bert512lny-engine-bf16-lny bert512-engine-bf16 --labels lny,nolny
mkdir -p $W/logs; cp -r build/gpu-check/logs build/gpu-check/status.md $W/logs/ 2>/dev/null
tar czf $OUT/all.tgz -C $W . ; echo "end at $SECONDS s"
