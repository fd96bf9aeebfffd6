#!/usr/bin/env python3
"""losscurve: whether the engine's CUDA kernels keep training runs' loss curves
within bf16 noise of the portable path, over several seeds.

Reads, per seed, three files written by cs_bench.py --losses, every step's
loss from that seed and token stream: KERNELS (bf16, the engine's kernels on),
NATIVE (bf16, CASESTUDY_KERNELS=native) and FP32 (fp32, the portable path).
One seed's bf16 curves part from the fp32 one in the steep descent, where
trajectories diverge quickly, so one seed cannot decide; the criterion
compares the two bf16 arms' distances to fp32 across seeds:

  d_k(s), d_n(s)  mean absolute difference over the steps of the kernels' and
                  the native curve from the fp32 curve of seed s
  D(s)            d_k(s) - d_n(s)

The kernels pass when every seed's run learns (its last 20 losses' mean at
least 1 below its first loss) and the seeds do not show the kernels further
from fp32 than native bf16 is: the one-sided 95% lower bound of mean(D),
mean - t(0.95, S-1) sd / sqrt(S), is at most 0. At least 3 seeds. Prints the
per-window means over the seeds, a row per seed and, last, one verdict line;
exit 0 pass, 1 fail, 2 bad input.

--labels ARM,BASE names the two arms otherwise (default kernels,native): with
--labels fp8,bf16 the triples are (precision fp8, bf16, fp32) and the verdict
is precision fp8's: its curve no further from fp32 than bf16's, beyond the
seeds' spread.

  python3 engine/native/tools/losscurve.py [--labels ARM,BASE] K1.json N1.json F1.json K2.json N2.json F2.json ...
"""
import json
import math
import statistics
import sys

MIN_SEEDS = 3

# one-sided 95% quantiles of Student's t by degrees of freedom (normal past 30)
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
       12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


def t95(df):
    """The one-sided 95% t quantile for df (the next smaller tabled df: conservative)."""
    return T95[max(k for k in T95 if k <= df)] if df <= 30 else 1.645


def losses(path):
    try:
        with open(path) as f:
            d = json.load(f)
        xs = [float(x) for x in d["losses"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("losscurve.py: %s: %s" % (path, e))
        sys.exit(2)
    if not xs or not all(math.isfinite(x) for x in xs):
        print("losscurve.py: %s: no losses, or a loss that is not finite" % path)
        sys.exit(2)
    return d.get("name", path), xs


def mad(a, b):
    """Mean absolute difference over the common steps."""
    n = min(len(a), len(b))
    return sum(abs(x - y) for x, y in zip(a[:n], b[:n])) / n


def tail(xs):
    return sum(xs[-20:]) / len(xs[-20:])


def verdict(seeds, arm="kernels", base="native"):
    """(ok, message) for a list of (arm, base, fp32) loss lists, one per seed:
    (kernels, native bf16, fp32) by default."""
    if len(seeds) < MIN_SEEDS:
        return False, "%d seed(s): the criterion needs at least %d" % (len(seeds), MIN_SEEDS)
    n = min(min(len(k), len(na), len(f)) for k, na, f in seeds)
    if n < 40:
        return False, "too few steps (%d) to judge" % n
    seeds = [(k[:n], na[:n], f[:n]) for k, na, f in seeds]
    stuck = [i for i, (k, _, _) in enumerate(seeds) if tail(k) > k[0] - 1.0]
    dk = [mad(k, f) for k, _, f in seeds]
    dn = [mad(na, f) for _, na, f in seeds]
    d = [a - b for a, b in zip(dk, dn)]
    m, sd = statistics.mean(d), statistics.stdev(d)
    lower = m - t95(len(d) - 1) * sd / math.sqrt(len(d))
    ok = lower <= 0 and not stuck
    if arm == "kernels":
        bad = "NOT within bf16 noise: the kernels move the curve further from fp32 than native bf16 does"
    else:
        bad = "NOT within %s noise: %s moves the curve further from fp32 than %s does" % (base, arm, base)
    head = (("within %s noise" % ("bf16" if arm == "kernels" else base)) if ok else
            "does not learn (seeds %s, counted from 1)" % [i + 1 for i in stuck] if stuck else bad)
    return ok, ("%s: over %d seeds of %d steps, mean |%s - fp32| %.4f, |%s - fp32| %.4f; "
                "difference %+.4f, one-sided 95%% lower bound %+.4f (pass: <= 0)" % (
                    head, len(seeds), n, arm, statistics.mean(dk), base, statistics.mean(dn), m, lower))


def main(argv):
    arm, base = "kernels", "native"
    if argv and argv[0].startswith("--labels"):
        spec = argv[0].partition("=")[2] if "=" in argv[0] else (argv[1] if len(argv) > 1 else "")
        argv = argv[1:] if "=" in argv[0] else argv[2:]
        arm, _, base = spec.partition(",")
        if not arm or not base:
            print("losscurve.py: --labels wants ARM,BASE (e.g. fp8,bf16)")
            sys.exit(2)
    if len(argv) < 3 or len(argv) % 3:
        print(__doc__.strip().splitlines()[-1])
        sys.exit(2)
    files = [losses(p) for p in argv]
    seeds = [(files[i][1], files[i + 1][1], files[i + 2][1]) for i in range(0, len(files), 3)]
    n = min(min(len(k), len(na), len(f)) for k, na, f in seeds)
    mean = statistics.mean
    print("steps    %-8s %-8s fp32     (means over %d seeds)" % (arm, base, len(seeds)))
    for s in range(0, n, 20):
        e = min(s + 20, n)
        cols = [mean([mean(run[j][s:e]) for run in seeds]) for j in range(3)]
        print("%3d-%-3d  %.4f   %.4f   %.4f" % (s, e - 1, *cols))
    print("%-24s |%s-fp32|  |%s-fp32|  last 20: %s  %s  fp32" % ("run (%s)" % arm, arm, base, arm, base))
    for i, (k, na, f) in enumerate(seeds):
        k, na, f = k[:n], na[:n], f[:n]
        print("%-24s %14.4f  %13.4f  %16.4f  %6.4f  %6.4f" % (files[3 * i][0], mad(k, f), mad(na, f), tail(k), tail(na),
                                                          tail(f)))
    ok, msg = verdict(seeds, arm, base)
    print(msg)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
