#!/usr/bin/env python3
"""losscurve: whether the engine's CUDA kernels keep a training run's loss curve
within bf16 noise of the portable path.

Reads three files written by cs_bench.py --losses, every step's loss from the
same seed and token stream: KERNELS (bf16, the engine's kernels on), NATIVE
(bf16, CASESTUDY_KERNELS=native) and FP32 (fp32, the portable path). The noise
floor is how far bf16 alone moves the curve: the mean absolute difference of
NATIVE and FP32 over the steps. The kernels pass when their curve's mean
absolute difference from NATIVE stays within that floor and the run learns
(the mean of the last 20 losses at least 1 below the first loss). Prints the
per-window means and, last, one verdict line; exit 0 pass, 1 fail, 2 bad input.

  python3 engine/native/tools/losscurve.py KERNELS.json NATIVE.json FP32.json
"""
import json
import sys


def losses(path):
    try:
        with open(path) as f:
            d = json.load(f)
        xs = [float(x) for x in d["losses"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("losscurve.py: %s: %s" % (path, e))
        sys.exit(2)
    if not xs:
        print("losscurve.py: %s: no losses" % path)
        sys.exit(2)
    return d.get("name", path), xs


def mad(a, b):
    """Mean absolute difference over the common steps."""
    n = min(len(a), len(b))
    return sum(abs(x - y) for x, y in zip(a[:n], b[:n])) / n


def verdict(kernels, native, fp32):
    """(ok, message) for three loss lists."""
    n = min(len(kernels), len(native), len(fp32))
    if n < 20:
        return False, "too few steps (%d) to judge" % n
    d_kn, d_nf = mad(kernels, native), mad(native, fp32)
    tail = sum(kernels[n - 20:n]) / 20
    learns = tail <= kernels[0] - 1.0
    ok = d_kn <= d_nf and learns
    return ok, ("%s: kernels vs native mean |diff| %.4f, bf16 floor (native vs fp32) %.4f over %d steps; "
                "kernels' loss %.3f -> %.3f (last 20)%s" % (
                    "within bf16 noise" if ok else "NOT within bf16 noise" if learns else "does not learn",
                    d_kn, d_nf, n, kernels[0], tail, "" if learns else ", want a fall of at least 1"))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1])
        sys.exit(2)
    (nk, k), (nn, na), (nf, f) = (losses(p) for p in argv)
    n = min(len(k), len(na), len(f))
    print("steps   %s   %s   %s" % (nk, nn, nf))
    for s in range(0, n, 20):
        e = min(s + 20, n)
        mean = lambda xs: sum(xs[s:e]) / (e - s)  # noqa: E731
        print("%3d-%-3d %.4f %.4f %.4f" % (s, e - 1, mean(k), mean(na), mean(f)))
    ok, msg = verdict(k, na, f)
    print(msg)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
