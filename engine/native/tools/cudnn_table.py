#!/usr/bin/env python3
"""cudnn_table: the Markdown table of gpu-check.sh's cudnn stage.

Reads cudnn.jsonl (cs_bench.py lines, one per ResNet-50 process, each with
"order", the run's place, and "first_of_precision", whether it was the first
of its precision and so also compiled cuDNN's kernels) and prints, per run,
the cuDNN setting (cs_info's "cudnn", CASESTUDY_CUDNN_BENCHMARK_LIMIT), the
first step's time and the steady step against the default's (the last warm
run at limit 10 of the same precision).

  python3 engine/native/tools/cudnn_table.py build/gpu-out/cudnn.jsonl
"""
import json
import sys

DEFAULT = "benchmark, limit 10"


def table(rows):
    out = []
    if not rows:
        return "## cuDNN autotuning\n\nno runs\n"
    out.append("## cuDNN autotuning (CASESTUDY_CUDNN_BENCHMARK_LIMIT), ResNet-50 %s x %s%s\n"
               % (rows[0].get("micro_batch"), rows[0].get("image_size"),
                  " channels_last" if rows[0].get("channels_last") else ""))
    out.append("Each row a fresh process, in the order run. The first of each precision also compiled "
               "cuDNN's kernels (cold: cached on this machine for the later runs, as for every launch "
               "of a study after its first). First step: the host clock of cs_step 0 (autotuning); "
               "steady step: median (p10-p90) of the measured steps; vs the default: the default's "
               "(last warm limit-10 run of the precision) steady step over this one's (above 1: faster).\n")
    out.append("| order | precision | cudnn | first step ms | engine's ms | steady step ms | vs the default |")
    out.append("|---|---|---|---|---|---|---|")
    warm = {}
    for r in rows:
        if r.get("cudnn") == DEFAULT and not r.get("first_of_precision"):
            warm[r["precision"]] = r["step_ms"]["median"]
    for r in rows:
        s, ref = r["step_ms"], warm.get(r["precision"])
        vs = "%.3fx" % (ref / s["median"]) if ref else "-"
        out.append("| %d | %s | %s%s | %.0f | %.0f | %.2f (%.2f-%.2f) | %s |" % (
            r.get("order", 0), r["precision"], r.get("cudnn"), " (cold)" if r.get("first_of_precision") else "",
            r["first_step_ms"], r["first_step_engine_ms"], s["median"], s["p10"], s["p90"], vs))
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2:
        print("usage: cudnn_table.py CUDNN.jsonl", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
