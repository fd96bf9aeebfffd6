#!/usr/bin/env python3
"""fp8_diag.py: the table of scripts/gpu-check.sh's fp8-diag stage.

Each run is given as NAME=LOSSES.json[:AUDIT.err] (LOSSES: cs_bench.py
--losses; AUDIT: the run's stderr, whose "fp8 audit ..." lines
src/fp8_diag.h's audit_line writes under CASESTUDY_FP8_AUDIT_EVERY), plus
--env NAME=WORDS to show each run's switches. The run named "bf16" is the
reference. The verdict (losswindow.py, whose docstring gives the measured
reasons for its window and tolerance): the median of the last --window (12)
losses against bf16's over the same steps; more than --tol (2%) above it and
rising above the run's own best earlier window is DIVERGED, above it without
rising is BEHIND (slower off a plateau), else the run tracks bf16. Transient
spikes (a step more than --tol above the median of the run's previous
--window steps) are listed per run as a finding, never as divergence: on an
H100 on 2026-12-07 every FP8 configuration spiked once at steps 25-28 and
came back by step 30, which a verdict on single steps had called divergence.

Writes markdown: one row per run (its switches, the loss at checkpoints
and at the end, the verdict, its spikes, an audit summary), then for audited runs
one row per audited forward pass and layer kind (averages over the layers
of that kind): the input's amax and amax / RMS (outliers), dz's amax, the
share of dz flushed to zero, the cast's gain
(the systematic scaling of dz by its quantization), and for dX and dW the
relative error, gain, signed bias and the share of flipped signs against
the exact product. Last, a reading of the matrix by the rules written
below (labelled as such: rules, not measurements).

Exit status: 0 with a table; 1 when a run has no losses, a loss is not
finite, no bf16 run is given, or an audited run printed no audit line
(its switch did not work); 2 on bad arguments.
"""
import argparse
import json
import math
import re
import sys

import losswindow

AUDIT = re.compile(r"^fp8 audit (.*)$")


def parse_audit(path):
    """The audit lines of a stderr log as dicts (header keys, dz and product fields)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = AUDIT.match(line.strip())
            if not m or "=" not in m.group(1).split(":", 1)[0]:
                continue  # an older format's line
            head, _, rest = m.group(1).partition(":")
            rec = dict(w.split("=", 1) for w in head.split() if "=" in w)
            for part in rest.split(";"):
                words = part.split()
                if not words:
                    continue
                prod = words[0]
                for w in words[1:]:
                    if "=" in w:
                        k, v = w.split("=", 1)
                        try:
                            rec[prod + "." + k] = float(v)
                        except ValueError:
                            rec[prod + "." + k] = v
            out.append(rec)
    return out


def fmt(v, nd=3):
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    if isinstance(v, float) and v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
        return "%.2e" % v
    return ("%." + str(nd) + "f") % v


def mean(xs):
    xs = [x for x in xs if isinstance(x, float)]
    return sum(xs) / len(xs) if xs else None


def summary(recs):
    """One cell: passes audited, worst non-finite count, the products' ranges."""
    if not recs:
        return "–"
    parts = ["%d passes" % len(recs)]
    nf = max(int(r.get("dx.nonfinite", 0) + r.get("dw.nonfinite", 0)) for r in recs)
    parts.append("nonfinite max %d" % nf)
    for p in ("dx", "dw"):
        rel = [r[p + ".rel"] for r in recs if p + ".rel" in r]
        gain = [r[p + ".gain"] for r in recs if p + ".gain" in r]
        signs = [r[p + ".signs"] for r in recs if p + ".signs" in r]
        if rel:
            parts.append("%s rel ≤ %s, gain %s..%s, signs ≤ %s" % (p, fmt(max(rel)), fmt(min(gain)), fmt(max(gain)),
                                                                fmt(max(signs))))
    cg = [r["dz.cast_gain"] for r in recs if "dz.cast_gain" in r]
    if cg:
        parts.append("cast gain %s..%s" % (fmt(min(cg)), fmt(max(cg))))
    return "; ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="NAME=LOSSES.json[:AUDIT.err]")
    ap.add_argument("--env", action="append", default=[], help="NAME=WORDS: a run's switches, shown")
    ap.add_argument("--audited", default="", help="comma-separated names of runs that must have audit lines")
    ap.add_argument("--tol", type=float, default=losswindow.TOL,
                    help="the last window's median over bf16's by more: diverged or behind (%(default)s)")
    ap.add_argument("--window", type=int, default=losswindow.WINDOW,
                    help="steps whose median is compared (%(default)s; losswindow.py says why)")
    ap.add_argument("--every", type=int, default=5, help="loss checkpoints every N steps (5)")
    a = ap.parse_args(argv)
    if a.window < 1 or not a.tol > 0:
        ap.error("--window must be at least 1 and --tol above 0")
    env = dict(e.split("=", 1) for e in a.env if "=" in e)
    runs, bad = [], []
    for spec in a.runs:
        if "=" not in spec:
            ap.error("run %r: want NAME=LOSSES.json[:AUDIT.err]" % spec)
        name, files = spec.split("=", 1)
        losses_path, _, audit_path = files.partition(":")
        try:
            with open(losses_path) as f:
                losses = json.load(f)["losses"]
        except (OSError, ValueError, KeyError) as e:
            bad.append("%s: no losses (%s)" % (name, e))
            losses = None
        recs = []
        if audit_path:
            try:
                recs = parse_audit(audit_path)
            except OSError as e:
                bad.append("%s: %s" % (name, e))
        if losses is not None and not all(isinstance(x, (int, float)) and math.isfinite(x) for x in losses):
            bad.append("%s: a loss is not finite" % name)
        runs.append((name, losses, recs))
    for name in filter(None, a.audited.split(",")):
        if not any(n == name and r for n, _, r in runs):
            bad.append("%s: audited, but no audit line (CASESTUDY_FP8_AUDIT_EVERY not honoured?)" % name)
    ref = next((ls for n, ls, _ in runs if n == "bf16" and ls), None)
    if ref is None:
        bad.append("no bf16 run with losses: nothing to judge divergence against")
    n_steps = max((len(ls) for _, ls, _ in runs if ls), default=0)
    marks = sorted(set([1] + list(range(a.every, n_steps + 1, a.every))))
    print("| run | switches | " + " | ".join("loss @%d" % s for s in marks) + " | last | verdict | spikes | audit |")
    print("|---|---|" + "---|" * len(marks) + "---|---|---|---|")
    diverged, spiked = {}, {}
    for name, ls, recs in runs:
        if not ls:
            print("| %s | %s | " % (name, env.get(name, "")) + " | ".join("–" for _ in marks) + " | – | NO RESULT | – | – |")
            continue
        cells = [fmt(ls[s - 1]) if s <= len(ls) else "–" for s in marks]
        verdict = "–"
        eps = losswindow.spikes(ls, a.window, a.tol)
        if eps:
            spiked[name] = eps
        if ref is not None and name != "bf16":
            if len(ls) != len(ref):
                d, verdict = None, "steps differ from bf16's"
            else:
                kind, text = losswindow.judge(ls, ref, a.window, a.tol)
                d = {"diverged": True, "tracks": False}.get(kind)  # behind: no verdict on divergence
                verdict = {"diverged": "DIVERGED", "tracks": "tracks bf16", "behind": "BEHIND bf16"}[kind] + ": " + text
            diverged[name] = d
        print("| %s | %s | %s | %s | %s | %s | %s |" % (name, env.get(name, ""), " | ".join(cells), fmt(ls[-1]), verdict,
                                                      losswindow.spike_text(eps), summary(recs)))
    detail = [(n, r) for n, _, rs in runs for r in rs]
    if detail:
        print()
        print("Audited passes, averaged over the layers of a kind (gain: <p - exact, exact>/<exact, exact>; "
              "bias: mean(p - exact)/mean|exact|; the cast: dz's FP8 values dequantized against dz):")
        print()
        print("| run | fwd | kind | x amax | x amax/rms | dz amax | underflow | cast gain | dx rel | dx gain | dx signs "
              "| dw rel | dw gain | dw bias | dw signs |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        groups = {}
        for n, r in detail:
            groups.setdefault((n, r.get("fwd"), r.get("kind")), []).append(r)
        for (n, fwd, kind), rs in groups.items():
            def m(k):
                return fmt(mean([r.get(k) for r in rs]))
            ratio = mean([r["x.amax"] / r["x.rms"] for r in rs if r.get("x.rms")])
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                n, fwd, kind, m("x.amax"), fmt(ratio, 1), m("dz.amax"), m("dz.underflow"), m("dz.cast_gain"),
                m("dx.rel"), m("dx.gain"), m("dx.signs"), m("dw.rel"), m("dw.gain"), m("dw.bias"), m("dw.signs")))
    print()
    print("Reading (rules fixed before the run, applied to the verdicts above; not a measurement):")
    for line in reading(diverged) + spike_reading(spiked, [n for n, ls, _ in runs if ls]):
        print("- " + line)
    for b in bad:
        print("- FAIL: " + b)
    return 1 if bad else 0


def spike_reading(spiked, names):
    """A line on the transient spikes: which runs spiked, where (a finding)."""
    if not spiked:
        return ["no run spiked (no step over its previous window's median by more than the tolerance)"]
    fp8 = [n for n in names if n != "bf16"]
    return ["transient spikes (a finding, not divergence): %d of %d FP8 runs%s; first steps %s" % (
        len([n for n in fp8 if n in spiked]), len(fp8), ", and bf16" if "bf16" in spiked else ", none in bf16",
        ", ".join("%s %d" % (n, spiked[n][0][0]) for n in names if n in spiked))]


def reading(d):
    """What the matrix says, by rules written before any run (docs/engine.md)."""
    out = []

    def div(n):
        return d.get(n)

    if div("t-e5m2") is None:
        return ["no divergence verdict for t-e5m2 (per tensor, e5m2; not run, or behind bf16 without rising): "
                "nothing to localise"]
    if not div("t-e5m2"):
        out.append("t-e5m2 tracked bf16 over the last window: no divergence to localise at these steps")
        return out
    if div("t-e5m2-exact"):
        out.append("diverges with no quantization in the backward: the forward (per-tensor e4m3) is involved")
    elif div("t-e5m2-exact") is False:
        out.append("the backward's quantization is needed (exact backward tracks bf16)")
    if div("t-e5m2-emulate") is False:
        out.append("the same FP8 operands multiplied in fp32 track bf16: the scaled GEMM path (_scaled_mm "
                   "with an e5m2 operand, its scales or layout) is at fault, not the recipe's numerics")
    elif div("t-e5m2-emulate"):
        out.append("the recipe's numerics diverge without _scaled_mm (emulate): not the GEMM")
        if div("t-e5m2-qdq"):
            out.append("dz's e5m2 quantization alone (W, x unquantized) diverges: the gradient's cast")
        elif div("t-e5m2-qdq") is False:
            out.append("dz's quantization alone tracks: the combination with the per-tensor e4m3 W/x of "
                       "the backward")
    if div("t-e5m2-decor") is False:
        out.append("dW's and dX's gradient cast on shifted grids tracks: the one shared cast of dz per tensor "
                   "(correlated rounding errors of dX and dW) is at fault")
    elif div("t-e5m2-decor"):
        out.append("independent rounding of dX's and dW's gradient still diverges: not the shared cast")
    if div("t-e5m2-gradrow") is False:
        out.append("dz scaled per row/column (W, x per tensor) tracks: the per-tensor scaling of the gradient "
                   "is at fault (its granularity, or its one shared cast: see t-e5m2-decor)")
    elif div("t-e5m2-gradrow"):
        out.append("dz scaled per row/column still diverges: not the gradient's scale granularity alone "
                   "(with W, x per tensor in the backward)")
    for n, what in (("t-e5m2-dx", "dX only"), ("t-e5m2-dw", "dW only"),
                    ("t-e5m2-resid", "attention-out and MLP-down only (dz = the residual gradient)"),
                    ("t-e5m2-inner", "qkv and MLP-up only")):
        if div(n) is not None:
            out.append("e5m2 in %s: %s" % (what, "diverges" if div(n) else "tracks bf16"))
    return out


if __name__ == "__main__":
    sys.exit(main())
