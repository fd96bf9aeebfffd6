#!/usr/bin/env bash
# compare.sh: the engine against its PyTorch references on one GPU, in one run:
# BERT-large (micro-batch 32, 128 and 512 tokens) and ResNet-50 (micro-batch 256,
# 224 pixels, channels_last), bf16; the engine eager and with CUDA graphs
# (engine/native/tools/cs_bench.py), the references eager and under
# torch.compile. Writes every JSON line to OUTDIR/compare.jsonl and prints a
# table with the ratios to the references last.
#
# usage: bench/reference/compare.sh ENGINE_LIB [OUTDIR] [bert|resnet50]...
#   ENGINE_LIB  libcasestudy_engine.so built with CUDA (make engine on the GPU machine)
# Environment: STEPS (measured steps, default 30), WARMUP (default 10).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
lib=$1 out=${2:-build/compare}
shift $(($# < 2 ? $# : 2))
families=("$@")
[[ ${#families[@]} -gt 0 ]] || families=(bert resnet50)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
steps=${STEPS:-30} warmup=${WARMUP:-10}
[[ -f $lib ]] || { echo "compare.sh: no engine library at $lib (build it with make engine)" >&2; exit 2; }
mkdir -p "$out"
jsonl=$out/compare.jsonl
: >"$jsonl"
status=0

engine() { # name, config JSON
  if ! python3 "$root/engine/native/tools/cs_bench.py" --lib "$lib" --name "$1" --config "$2" \
    --warmup "$warmup" --steps "$steps" >>"$jsonl"; then
    echo "compare.sh: engine run $1 failed: $(tail -1 "$jsonl")" >&2
    status=1
  fi
}
reference() { # script and flags
  if ! python3 "$here/$1" "${@:2}" --warmup "$warmup" --steps "$steps" >>"$jsonl" 2>"$out/reference.err"; then
    echo "compare.sh: reference $* failed: $(tail -3 "$out/reference.err")" >&2
    status=1
  fi
}

for fam in "${families[@]}"; do
  case $fam in
    bert)
      for seq in 128 512; do
        cfg='{"family":"bert","preset":"large","micro_batch":32,"seq_len":'$seq',"device":"cuda","precision":"bf16","seed":1'
        engine engine-bf16 "$cfg}"
        engine engine-bf16-graphs "$cfg,\"graphs\":true}"
        reference bert_hf.py --preset large --micro-batch 32 --seq-len "$seq"
        reference bert_hf.py --preset large --micro-batch 32 --seq-len "$seq" --compile
      done ;;
    resnet50)
      cfg='{"family":"resnet50","preset":"50","micro_batch":256,"image_size":224,"channels_last":true,"device":"cuda","precision":"bf16","seed":1'
      engine engine-bf16 "$cfg}"
      engine engine-bf16-graphs "$cfg,\"graphs\":true}"
      reference resnet_tv.py --micro-batch 256 --image-size 224
      reference resnet_tv.py --micro-batch 256 --image-size 224 --compile ;;
    *) echo "compare.sh: unknown family $fam (bert or resnet50)" >&2; exit 2 ;;
  esac
done

python3 - "$jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
groups = {}
for r in rows:
    if "error" in r:
        continue
    c = r.get("config", {})
    model = r.get("model") or f'{c.get("family")}-{c.get("preset")}'.replace("resnet50-50", "resnet50")
    shape = r.get("seq_len") or r.get("image_size") or c.get("seq_len") or c.get("image_size")
    groups.setdefault((model, shape), []).append(r)
print("| model | shape | run | step ms (p10-p90) | samples/s | TFLOP/s | MFU | peak GiB | vs eager | vs compile |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (model, shape), rs in groups.items():
    ref = {r["name"].split("-")[1]: r["samples_per_s"] for r in rs if r["name"].startswith(("hf-", "tv-"))}
    for r in rs:
        s = r["step_ms"]
        ratio = lambda k: "%.2fx" % (r["samples_per_s"] / ref[k]) if k in ref else "-"
        print("| %s | %s | %s | %.1f (%.1f-%.1f) | %.0f | %.1f | %.1f%% | %.1f | %s | %s |" % (
            model, shape, r["name"], s["median"], s["p10"], s["p90"], r["samples_per_s"], r["tflops"],
            100 * r["mfu"], r["mem_peak_bytes"] / 2**30, ratio("eager"), ratio("compile")))
EOF
exit $status
