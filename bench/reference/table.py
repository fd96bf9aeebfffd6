#!/usr/bin/env python3
"""table: the Markdown tables of a benchmark run, from its JSON lines.

Reads lines in the output contract (bench/reference/README.md) of the engine
(engine/native/tools/cs_bench.py, names engine-*) and the references
(gpt2_nano.py, gpt2_hf.py, bert_hf.py, resnet_tv.py; names PREFIX-eager and
PREFIX-compile), each with a "group" field (one benchmark shape; the run's
scripts add it), and lines that say a run did not produce a result:
{"group", "name", "status": "skipped" | "timeout" | "failed", "reason"}, or an
engine error line {"name", "error", "status", "message"}. Prints a summary
(per group: the best engine run in any of the references' precisions against
the best reference eager and the best compiled, each named, MFU on both
sides) and a table per group, each run against those two.
Groups named "profile ..." (gpu-check.sh's profile stage: a few steps before
the profiler runs) are left out of the summary. Runs named with a round,
-rN (gpu-check.sh's gpt-ab: a fresh launch each), get a verdict on launches:
per arm the median over its launches against the strongest reference arm's,
and the ratios of the launches paired by round.

    python3 bench/reference/table.py OUT/bench.jsonl
"""
import json
import re
import statistics
import sys

ROUND = re.compile(r"-r(\d+)(?=-|$)")  # engine-bf16-graphs-r2, nano-r2-compile


def load(path):
    groups = {}  # insertion-ordered: the order the runs were planned in
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                r = {"name": f"line {n}", "status": "failed", "reason": f"not JSON: {e}"}
            groups.setdefault(r.get("group") or r.get("model") or "?", []).append(r)
    return groups


def ok(r):
    return "step_ms" in r and "error" not in r and "status" not in r


def is_ref(r):
    """A reference's line: not the engine's, named PREFIX-eager or PREFIX-compile."""
    n = r.get("name", "")
    return not n.startswith("engine") and n.endswith(("-eager", "-compile"))


def refs(rows):
    """The best reference result (samples/s) of each mode: {"eager": row, "compile": row}."""
    out = {}
    for r in rows:
        if ok(r) and is_ref(r):
            mode = r["name"].rsplit("-", 1)[1]
            if mode not in out or r["samples_per_s"] > out[mode]["samples_per_s"]:
                out[mode] = r
    return out


def ratio(r, ref):
    return "%.2f×" % (r["samples_per_s"] / ref["samples_per_s"]) if ref and ref["samples_per_s"] else "–"


def named(text, ref):
    return "%s (%s)" % (text, ref["name"]) if ref else text


def pct(x):
    return "%.1f%%" % (100 * x) if x else "–"


def why(r):
    if "error" in r:
        return "failed: %s status %s: %s" % (r["error"], r.get("status"), r.get("message", "")[:160])
    return "%s: %s" % (r.get("status", "failed"), r.get("reason", ""))


def summary(groups):
    lines = ["| benchmark | engine (best) | samples/s | MFU | vs best eager | eager MFU | vs best compile "
             "| compile MFU |",
             "|---|---|---|---|---|---|---|---|"]
    for g, rows in groups.items():
        if g.startswith("profile "):
            continue
        ref = refs(rows)
        precs = {r.get("precision") for r in rows if ok(r) and is_ref(r)}
        eng = [r for r in rows if ok(r) and not is_ref(r) and (not precs or r.get("precision") in precs)]
        best = max(eng, key=lambda r: r["samples_per_s"], default=None)
        e, c = ref.get("eager"), ref.get("compile")
        if best is None:
            lines.append("| %s | no result | – | – | – | %s | – | %s |" % (
                g, pct(e["mfu"]) if e else "–", pct(c["mfu"]) if c else "–"))
            continue
        lines.append("| %s | %s | %.0f | %s | %s | %s | %s | %s |" % (
            g, best["name"], best["samples_per_s"], pct(best["mfu"]), named(ratio(best, e), e),
            pct(e["mfu"]) if e else "–", named(ratio(best, c), c), pct(c["mfu"]) if c else "–"))
    return lines


def detail(g, rows):
    ref = refs(rows)
    lines = ["### " + g, "",
             "| run | precision | step ms (p10–p90) | samples/s | tokens/s | TFLOP/s | MFU | fwd/bwd/opt ms "
             "| peak GiB | loss first→last | vs best eager | vs best compile |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not ok(r):
            lines.append("| %s | | %s | | | | | | | | | |" % (r.get("name", "?"), why(r)))
            continue
        s, ph = r["step_ms"], r.get("eager_phase_ms")
        phs = "%.1f/%.1f/%.1f" % (ph["forward_ms"], ph["backward_ms"], ph["optimizer_ms"]) if ph else "–"
        mem = "%.1f%s" % (r["mem_peak_bytes"] / 2**30, "*" if r.get("graphed") else "")
        lines.append("| %s | %s | %.1f (%.1f–%.1f) | %.0f | %s | %.1f | %s | %s | %s | %.3f→%.3f | %s | %s |" % (
            r["name"], r.get("precision", "?"), s["median"], s["p10"], s["p90"], r["samples_per_s"],
            "%.0f" % r["tokens_per_s"] if r.get("tokens_per_s") else "–", r["tflops"], pct(r["mfu"]), phs,
            mem, r["loss_first"], r["loss_last"], ratio(r, ref.get("eager")), ratio(r, ref.get("compile"))))
    return lines + [""]


def arms(rows):
    """{arm: {round: step median ms}} of the rows named with a round (-rN)."""
    out = {}
    for r in rows:
        m = ROUND.search(r.get("name", ""))
        if m and ok(r):
            arm = r["name"][:m.start()] + r["name"][m.end():]
            out.setdefault(arm, {})[int(m.group(1))] = r["step_ms"]["median"]
    return out


def launches(groups):
    """Per group with rounds: each arm's launches against the reference arm
    with the lowest median step (a reference's: PREFIX-eager/-compile)."""
    lines = []
    for g, rows in groups.items():
        a = arms(rows)
        refs_ = [k for k in a if is_ref({"name": k})]
        if not refs_:
            continue
        ref = min(refs_, key=lambda k: statistics.median(a[k].values()))
        rm = statistics.median(a[ref].values())
        lines += ["### " + g, "",
                  "| arm | launches | step ms: median of launches (min–max) | vs %s: medians "
                  "| per launch, paired by round (min–max) |" % ref,
                  "|---|---|---|---|---|"]
        for arm, by_round in a.items():
            ms = list(by_round.values())
            med = statistics.median(ms)
            paired = [a[ref][i] / by_round[i] for i in by_round if i in a[ref]]
            lines.append("| %s | %d | %.2f (%.2f–%.2f) | %.3f× | %s |" % (
                arm, len(ms), med, min(ms), max(ms), rm / med,
                "%.3f–%.3f× (%d)" % (min(paired), max(paired), len(paired)) if paired else "–"))
        lines.append("")
    return lines


def libraries(groups):
    """The library files the engine's processes loaded (cs_bench.py's "libraries"
    and "cudnn_runtime", a GPU rank's cs_info): each distinct copy with how many
    runs loaded it. Two copies of one name: runs that loaded different files.
    [] where no line carries them (the CPU, older lines, references)."""
    copies, cudnn = {}, {}
    for rows in groups.values():
        for r in rows:
            for name, path in sorted((r.get("libraries") or {}).items()):
                copies[(name, path)] = copies.get((name, path), 0) + 1
            if r.get("cudnn_runtime"):
                cudnn[r["cudnn_runtime"]] = cudnn.get(r["cudnn_runtime"], 0) + 1
    if not copies:
        return []
    out = ["## Libraries the engine's processes loaded", "",
           "cuDNN loaded: " + ", ".join(f"{v} ({n} runs)" for v, n in sorted(cudnn.items())) if cudnn
           else "cuDNN loaded: none reported", ""]
    out += [f"- `{name}` {path} ({n} runs)" for (name, path), n in sorted(copies.items())]
    return out + [""]


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: table.py BENCH.jsonl")
    groups = load(argv[0])
    out = ["## Engine against the references (same GPU, same run)", "",
           "Ratios are samples/s against the reference eager and `torch.compile` runs of the group; "
           "MFU from each side's model FLOPs and the dense peak of its precision.", ""]
    out += summary(groups) + [""]
    verdicts = launches(groups)
    if verdicts:
        out += ["## Verdicts on launches", "",
                "A fresh launch per arm and round; a verdict rests on the launches' medians, not "
                "on one launch's steps.", ""] + verdicts
    out += libraries(groups)
    out += ["## Runs", ""]
    for g, rows in groups.items():
        out += detail(g, rows)
    out.append("\\* peak memory of a graph replay counts only what was allocated since the graph's "
               "private pool was set up; not comparable with eager runs.")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
