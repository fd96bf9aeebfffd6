#!/usr/bin/env python3
"""fp8_ratios: one benchmark group's precision fp8 runs against its bf16 run
(gpu-check.sh's fp8 stage), from bench.jsonl: per fp8 run the step-time
ratio fp8/bf16 (below 1: FP8 pays) and the last loss against bf16's.

    python3 bench/reference/fp8_ratios.py OUT/bench.jsonl "gpt-124m 16x1024 fp8"

Prints one line; exits 1 (the verdict fails) when the bf16 run or every fp8
run gave no result, or an fp8 run's last loss lies above bf16's by more than
LOSS_SLACK of bf16's (a few steps of FP8 rounding move the loss far less; a
diverging run, as per-tensor scaling at GPT-2 124M on 2026-12-06, 8.36 ->
16.25, far more); 3 (no verdict) when runs were only skipped for time
(gpu-check.sh's budget); else 0.
"""
import json
import sys

BF16 = "engine-bf16-graphs"
LOSS_SLACK = 0.02  # relative to bf16's last loss


def load(path, group):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("group") == group and "name" in r:
                rows[r["name"]] = r
    return rows


def ok(r):
    return r is not None and "step_ms" in r and "error" not in r and "status" not in r


def skipped(r):
    return r is not None and r.get("status") == "skipped"


def verdict(rows):
    """(line, passed) for one group's rows {name: row}; passed is None where
    runs were skipped for time and nothing failed (no verdict)."""
    base = rows.get(BF16)
    fp8 = sorted(n for n in rows if n.startswith("engine-fp8-"))
    if skipped(base) or (ok(base) and fp8 and all(skipped(rows[n]) for n in fp8)):
        return "no verdict: runs skipped for time", None
    if not ok(base):
        return "no bf16 result (%s)" % BF16, False
    b_ms, b_loss = base["step_ms"]["median"], base["loss_last"]
    parts, passed, any_ok = [], True, False
    for n in fp8:
        r = rows[n]
        label = n[len("engine-fp8-"):].replace("-graphs", "")
        if not ok(r):
            parts.append("%s no result" % label)
            if not skipped(r):  # crashed or timed out: a failure, not a run left out for time
                passed = False
            continue
        any_ok = True
        ms, loss = r["step_ms"]["median"], r["loss_last"]
        bad = not loss <= b_loss * (1 + LOSS_SLACK)  # a nan fails too
        passed = passed and not bad
        parts.append("%s/bf16 %.2fx (%.1f / %.1f ms), loss %.3f%s" % (
            label, ms / b_ms, ms, b_ms, loss,
            " ABOVE bf16's %.3f by more than %d%%" % (b_loss, LOSS_SLACK * 100) if bad else ""))
    if not any_ok:
        return "no fp8 result" + ("; " + "; ".join(parts) if parts else ""), False
    return "; ".join(parts) + "; bf16 loss %.3f" % b_loss, passed


def main(argv):
    if len(argv) != 3:
        print("usage: fp8_ratios.py BENCH_JSONL GROUP", file=sys.stderr)
        return 2
    line, passed = verdict(load(argv[1], argv[2]))
    print(line)
    return 3 if passed is None else 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
