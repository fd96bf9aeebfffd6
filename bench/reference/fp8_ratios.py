#!/usr/bin/env python3
"""fp8_ratios: one benchmark group's precision fp8 runs against its bf16 run
(gpu-check.sh's fp8 stage), from bench.jsonl: per fp8 run the step-time
ratio fp8/bf16 (below 1: FP8 pays) and its loss curve against bf16's.

    python3 bench/reference/fp8_ratios.py OUT/bench.jsonl "gpt-124m 16x1024 fp8" [NAME=LOSSES.json ...]

NAME=LOSSES.json: a run's every-step losses (cs_bench.py --losses). With
them, engine/native/tools/losswindow.py judges the run: the median of its
last 12 losses against bf16's over the same steps; more than 2% above is a
failure, named "diverged" where the run's loss also rose above its own
best earlier window, "behind" where it did not (slower off a plateau).
Transient spikes (a step over the median of its previous 12 by more than
2%) are listed as a finding, not a failure: on an H100 on 2026-12-07 every
FP8 recipe at GPT-2 124M spiked once at steps 25-28 and came back by step
30, and the 25-step runs' last loss (18.7, 16.25 on 2026-12-06) had been
read as divergence (losswindow.py gives the measurements). A run without
a losses file is judged on its last loss alone (the old rule, said so in
the line): a spike on the last step fails it.

Prints one line; exits 1 (the verdict fails) when the bf16 run or every fp8
run gave no result, or an fp8 run lies above bf16 as above; 3 (no verdict)
when runs were only skipped for time (gpu-check.sh's budget); else 0.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine", "native", "tools"))
import losswindow  # noqa: E402

BF16 = "engine-bf16-graphs"


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


def judge(r, b, curves, n):
    """(text, bad) for fp8 run r (name n) against bf16 row b: by the loss
    curves where both are in curves, else by the last losses."""
    ls, ref = curves.get(n), curves.get(BF16)
    if ls and ref:
        if not all(math.isfinite(x) for x in ls):
            return "losses not finite", True
        kind, text = losswindow.judge(ls, ref)
        eps = losswindow.spikes(ls)
        spikes = "" if not eps else ", spikes %s" % losswindow.spike_text(eps)
        if kind == "tracks":
            return "loss %s%s" % (text, spikes), False
        return "loss %s: %s ABOVE bf16's by more than %d%%%s" % (
            text, kind.upper(), losswindow.TOL * 100, spikes), True
    loss, b_loss = r["loss_last"], b["loss_last"]
    bad = not loss <= b_loss * (1 + losswindow.TOL)  # a nan fails too
    return "last loss %.3f (no per-step losses)%s" % (
        loss, " ABOVE bf16's %.3f by more than %d%%" % (b_loss, losswindow.TOL * 100) if bad else ""), bad


def verdict(rows, curves=None):
    """(line, passed) for one group's rows {name: row} and loss curves
    {name: [loss per step]}; passed is None where runs were skipped for time
    and nothing failed (no verdict)."""
    curves = curves or {}
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
        ms = r["step_ms"]["median"]
        text, bad = judge(r, base, curves, n)
        passed = passed and not bad
        parts.append("%s/bf16 %.2fx (%.1f / %.1f ms), %s" % (label, ms / b_ms, ms, b_ms, text))
    if not any_ok:
        return "no fp8 result" + ("; " + "; ".join(parts) if parts else ""), False
    return "; ".join(parts) + "; bf16 last loss %.3f" % b_loss, passed


def read_curves(specs):
    """{name: losses} from NAME=LOSSES.json words; a missing or bad file is
    left out (that run is judged on its last loss)."""
    out = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        try:
            with open(path) as f:
                out[name] = [float(x) for x in json.load(f)["losses"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[3:]):
        print("usage: fp8_ratios.py BENCH_JSONL GROUP [NAME=LOSSES.json ...]", file=sys.stderr)
        return 2
    line, passed = verdict(load(argv[1], argv[2]), read_curves(argv[3:]))
    print(line)
    return 3 if passed is None else 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
