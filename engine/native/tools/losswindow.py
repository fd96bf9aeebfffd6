"""losswindow: one run's loss curve against a reference run's (precision fp8
against bf16), judged over a window of steps, with transient spikes reported
apart. Used by fp8_diag.py (gpu-check.sh's fp8-diag stage) and by
bench/reference/fp8_ratios.py (the fp8 stage's per-group verdict).

  level(ls)     the median of the last K (WINDOW) losses: a spike of fewer
                than K/2 steps inside the window does not move it
  excess        level(run) / level(ref) - 1, the two windows over the same steps
  rising        level(run) above the lowest median of any K consecutive
                earlier steps of the run itself by more than X (TOL): the
                loss went up and stayed up
  verdict       "tracks" where excess <= X; "diverged" where excess > X and
                rising; "behind" where excess > X without rising (a run that
                is slower to leave a plateau, not one that blows up)
  spikes        steps whose loss lies more than X above the median of the
                run's own previous K steps (at least one), grouped into
                episodes of consecutive steps: a finding, never a failure

Why K = 12 and X = 2% (measured on an H100, 2026-12-07, main 6318563,
GPT-2 124M 16 x 1024, seed 1, eager; gpu-check fp8-diag, 40 and 120 steps):
- Every FP8 configuration (per tensor e4m3 and e5m2, per row e5m2, and FP8
  in the forward only) had one transient loss spike at steps 25-28, +2.4% to
  +140% over bf16's loss at that step, and was back within 0.2% of bf16's by
  step 30: at most 5 steps (25-29). A median of 12 ignores up to 5
  outlying steps. 12 steps also fit the fp8 stage's 25-step runs (steps
  14-25, on the loss plateau there).
- On the plateau (steps 15-50) every run's loss lay within 0.2% of bf16's at
  the same step (the largest: 8.391 against 8.377 at step 30); the spikes
  were 1.2 to 70 times X. X = 2% is 10 times the plateau's spread.
- After the plateau one seed's curves part by which run leaves it first: at
  step 120 the FP8 runs ended 2% to 27% BELOW bf16 (bf16 7.907; per row
  e5m2 5.736). The other order would put a healthy run that far above: hence
  "behind", told apart from "diverged" by the run's own curve (rising).
One seed decides nothing about quality: losscurve.py's several-seed
criterion does. This judges whether a run blew up and stayed up.
"""
import math
import statistics

WINDOW = 12
TOL = 0.02


def level(ls, k=WINDOW):
    """The median of the last k losses (all of them when fewer)."""
    return statistics.median(ls[-k:])


def rising(ls, k=WINDOW, tol=TOL):
    """(rising, best): whether the last window's median lies more than tol
    above the lowest median of k consecutive earlier steps (best)."""
    if len(ls) <= k:
        return False, level(ls, k)
    best = min(statistics.median(ls[i:i + k]) for i in range(0, len(ls) - k))
    return level(ls, k) > best * (1 + tol), best


def spikes(ls, k=WINDOW, tol=TOL):
    """Episodes [(first step, last step, largest rise, its step)], steps
    1-based: losses more than tol above the median of the previous k (at
    least one) of the run's own."""
    eps = []
    for i in range(1, len(ls)):
        prev = statistics.median(ls[max(0, i - k):i])
        rise = ls[i] / prev - 1 if prev > 0 else 0.0
        if rise <= tol:
            continue
        step = i + 1
        if eps and eps[-1][1] == step - 1:
            a, _, top, at = eps[-1]
            eps[-1] = (a, step, max(top, rise), at if top >= rise else step)
        else:
            eps.append((step, step, rise, step))
    return eps


def spike_text(eps):
    """One phrase: 'none' or 'N: steps 25-27 (+124.3% at 25), ...'."""
    if not eps:
        return "none"
    return "%d: %s" % (len(eps), ", ".join(
        "step%s %s (%+.1f%% at %d)" % ("s" if a != b else "", "%d-%d" % (a, b) if a != b else "%d" % a, 100 * top, at)
        for a, b, top, at in eps))


def judge(ls, ref, k=WINDOW, tol=TOL):
    """(kind, text) of run losses ls against reference losses ref over the
    same steps: kind 'tracks', 'diverged' or 'behind' (module docstring)."""
    n = min(len(ls), len(ref))
    # A non-finite loss compares false with everything, which would read as
    # "behind": it is the run blowing up.
    bad = [i + 1 for i, x in enumerate(ls[:n]) if not math.isfinite(x)]
    if bad:
        return "diverged", "non-finite loss from step %d" % bad[0]
    k = min(k, n)
    mine, theirs = level(ls[:n], k), level(ref[:n], k)
    excess = mine / theirs - 1
    up, best = rising(ls[:n], k, tol)
    where = "median of steps %d-%d %.3f vs %.3f (%+.2f%%)" % (n - k + 1, n, mine, theirs, 100 * excess)
    if excess <= tol:
        return "tracks", where
    if up:
        return "diverged", "%s, rising %+.1f%% above its own best window %.3f" % (where, 100 * (mine / best - 1), best)
    return "behind", "%s, not rising (its best window %.3f): slower, not blown up" % (where, best)
