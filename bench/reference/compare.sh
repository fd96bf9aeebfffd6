#!/usr/bin/env bash
# compare.sh: the engine against its PyTorch references on one GPU, in one run:
# BERT-large (micro-batch 32, 128 and 512 tokens) and ResNet-50 (micro-batch 256,
# 224 pixels, channels_last), bf16; the engine eager and with CUDA graphs, the
# references eager and under torch.compile. Prints every JSON line, writes them
# to OUTDIR/compare.jsonl and ends with a table of throughput ratios.
#
# usage: bench/reference/compare.sh ENGINE_LIB ENGINE_TEST_BINARY [OUTDIR] [bert|resnet50]...
#   ENGINE_LIB          libcasestudy_engine.so built with CUDA
#   ENGINE_TEST_BINARY  `go test -c -o engine.test ./engine` (built anywhere)
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
lib=$1 testbin=$2 out=${3:-.}
shift $(($# < 3 ? $# : 3))
families=("$@")
[[ ${#families[@]} -gt 0 ]] || families=(bert resnet50)
here=$(cd "$(dirname "$0")" && pwd)
[[ -f $lib ]] || { echo "compare.sh: no engine library at $lib (build it with make engine)" >&2; exit 2; }
[[ -x $testbin ]] || { echo "compare.sh: $testbin is not an executable test binary (go test -c ./engine)" >&2; exit 2; }
mkdir -p "$out"
jsonl=$out/compare.jsonl
: >"$jsonl"

for fam in "${families[@]}"; do
  case $fam in
    bert)
      filter='TestGPUBenchFamilies/bert'
      refs=("bert_hf.py --preset large --micro-batch 32 --seq-len 128"
            "bert_hf.py --preset large --micro-batch 32 --seq-len 512") ;;
    resnet50)
      filter='TestGPUBenchFamilies/resnet50'
      refs=("resnet_tv.py --micro-batch 256 --image-size 224") ;;
    *) echo "compare.sh: unknown family $fam (bert or resnet50)" >&2; exit 2 ;;
  esac
  CASESTUDY_GPU_TESTS=1 CASESTUDY_BENCH=1 CASESTUDY_ENGINE_LIB=$lib \
    "$testbin" -test.run "$filter" -test.v -test.timeout 30m | tee /dev/stderr | grep '^{' | tee -a "$jsonl"
  for r in "${refs[@]}"; do
    for mode in "" "--compile"; do
      # shellcheck disable=SC2086
      python3 "$here"/$r $mode | tee -a "$jsonl"
    done
  done
done

python3 - "$jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
shapes = {}
for r in rows:
    key = (r["model"], r.get("seq_len") or r.get("image_size"))
    shapes.setdefault(key, {})[r["mode"]] = r
print(f"\n{'model':<12}{'shape':>6}  {'mode':<14}{'samples/s':>11}{'step ms':>9}{'TFLOP/s':>9}{'MFU':>7}  vs eager  vs compile")
for (model, shape), modes in shapes.items():
    eager, comp = modes.get("eager"), modes.get("compile")
    for mode, r in modes.items():
        ratio = lambda ref: f"{r['samples_per_s'] / ref['samples_per_s']:8.3f}" if ref else "       -"
        mfu = f"{r['mfu']:.3f}" if r.get("mfu") else "-"
        print(f"{model:<12}{shape:>6}  {mode:<14}{r['samples_per_s']:>11.1f}{r['step_ms_median']:>9.2f}"
              f"{r['tflops']:>9.1f}{mfu:>7}  {ratio(eager)}  {ratio(comp)}")
EOF
