#!/usr/bin/env python3
"""predict-decompose.py: where the N-rank step goes that the prediction does
not price (issue 40, docs/predict.md "Where the step goes").

Reads an OUT directory of scripts/predict-validate.sh (one$N: the one-rank
inputs as N copies; cal$N: the stretch calibration; r$N: the N-rank runs;
predicted$N.json: the prediction) and prints, per trial, medians over every
measured step of every launch:

  part       inputs (copies)  calibration (loaded)  N-rank run   model
  forward    ...
  backward
  tail       the reducer's finalize (the wait for the collectives, the divide)
  optimizer
  step       (the N-rank column: each launch's mean step on its slowest rank,
              as runs.Measured takes it; the model column: the prediction)
  comm       summed bucket times a step: the inputs' world of one, the
             calibration's group, the N-rank run's per rank (waits for late
             peers included), the least over ranks (transfer), the model's
  per size   each bucket size: the median time of one collective in each

and then, per launch of the N-rank run and per input copy, each rank's
compute (forward + backward + optimizer, the median over its steps): whether
one rank of a launch computed persistently slower than the others (its
forward, backward and optimizer alike), as one input copy can against
another; and, where scripts/sched-sample.sh sampled them (OUT/sched-*), each
process's threads together: how many CPUs they kept busy (CPU seconds a
second: the compute thread's one, plus what Gloo's threads add) and the share
of their time spent runnable but waiting for a CPU (1 CPU busy and a wait
share near 0 is a rank that had its core to itself).

    scripts/predict-decompose.py OUT N

Measurement only: it prints what the records hold, nothing is fitted.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def trials(run_root):
    """Every trial record of every run under run_root (STUDY/RUN_ID/trials.jsonl)."""
    for f in sorted(Path(run_root).glob("*/*/trials.jsonl")):
        for line in open(f):
            line = line.strip()
            if line:
                yield json.loads(line)


def key(t):
    """The trial as predict's validation names it: knob=value of each changed knob."""
    knobs = t.get("knobs") or {}
    return " ".join(f"{c}={knobs.get(c, '?')}" for c in t.get("changed") or []) or "(baseline)"


def collect(run_root, loaded=None):
    """Per trial: lists of per-step parts (every rank, every ok launch) and,
    per launch, its mean step on its slowest rank. loaded: True keeps only the
    calibration's loaded steps, False only its clean ones, None every step."""
    out = defaultdict(lambda: defaultdict(list))
    for t in trials(run_root):
        k = key(t)
        for rp in t.get("repeats") or []:
            if rp.get("outcome") != "ok":
                continue
            slowest = 0.0
            ranks = rp.get("ranks") or []
            # The N-rank run's per-step bucket times over ranks (least: transfer).
            per_step_rank = defaultdict(dict)
            for r in ranks:
                steps = r.get("steps") or []
                if steps:
                    slowest = max(slowest, sum(s["step_ms"] for s in steps) / len(steps))
                for i, s in enumerate(steps):
                    is_loaded = (s.get("interfere_gbps") or 0) > 0
                    if loaded is not None and is_loaded != loaded:
                        continue
                    d = out[k]
                    for part in ("forward_ms", "backward_ms", "tail_ms", "optimizer_ms", "step_ms"):
                        d[part].append(s.get(part))
                    bs = s.get("buckets") or []
                    d["comm_ms"].append(sum(b["ms"] for b in bs))
                    d["skew_ms"].append(sum(b.get("skew_ms") or 0 for b in bs))
                    d["transfer_ms"].append(sum(b.get("transfer_ms") or b["ms"] for b in bs) if len(ranks) > 1 else None)
                    d["nbuckets"].append(len(bs))
                    last_ready = [b.get("ready_ms") for b in bs if b.get("ready_ms") is not None]
                    d["last_ready_ms"].append(max(last_ready) if last_ready else None)
                    for b in bs:
                        d[("size", b["bytes"])].append(b["ms"])
                        if len(ranks) > 1:
                            d[("xfer", b["bytes"])].append(b.get("transfer_ms"))
                    per_step_rank[i][r.get("rank", 0)] = s
            if slowest > 0:
                out[k]["launch_mean_slowest"].append(slowest)
            # Per step of the N-rank run: how far apart the ranks' backward ends
            # (forward + backward) were, the rank skew a step starts its
            # collectives with.
            for i, byrank in per_step_rank.items():
                if len(byrank) > 1:
                    ends = [s["forward_ms"] + s["backward_ms"] for s in byrank.values()]
                    out[k]["bwd_end_spread"].append(max(ends) - min(ends))
    return out


def predictions(path):
    """predict's predictions by trial name (empty when the file is absent)."""
    if not path.exists():
        return {}
    doc = json.load(open(path))
    names = {c["id"]: c["changed"] for c in (doc.get("validation") or {}).get("checks") or []}
    return {names.get(p["id"], p["id"]): p for p in doc["predictions"]}


def rank_compute(run_root):
    """Per launch (run id, trial): each rank's median compute a step."""
    out = []
    for f in sorted(Path(run_root).glob("*/*/trials.jsonl")):
        for line in open(f):
            if not line.strip():
                continue
            t = json.loads(line)
            for rp in t.get("repeats") or []:
                if rp.get("outcome") != "ok":
                    continue
                per = [med([s["forward_ms"] + s["backward_ms"] + s["optimizer_ms"] for s in r.get("steps") or []])
                       for r in rp.get("ranks") or []]
                out.append((f.parent.name, key(t), per))
    return out


def spread(xs):
    """Largest over least of xs ("" unless every one is a positive number)."""
    if len(xs) < 2 or not all(x > 0 for x in xs):  # nan compares false
        return ""
    return f"{max(xs) / min(xs):.2f}"


def thread_deltas(files):
    """Per thread sampled in files: ((file, pid), CPU ms, run-queue wait ms,
    seconds sampled), last sample less first."""
    first, last = {}, {}
    for f in files:
        for line in open(f):
            w = line.split()
            if len(w) != 5:
                continue
            k = (f, w[1], w[2])
            v = (int(w[3]), int(w[4]), float(w[0]))
            first.setdefault(k, v)
            last[k] = v
    for k, (r1, w1, t1) in last.items():
        r0, w0, t0 = first[k]
        yield k[:2], (r1 - r0) / 1e6, (w1 - w0) / 1e6, t1 - t0


def sched(files):
    """Per process sampled in files: (CPU ms of all its threads, their
    run-queue wait ms, the seconds it was sampled over). Its threads are not
    named: which one computes is not known (the engine's calls may run on any
    of the worker's Go threads)."""
    procs = defaultdict(lambda: [0.0, 0.0, 0.0])
    for proc, cpu, wait, secs in thread_deltas(files):
        p = procs[proc]
        p[0] += cpu
        p[1] += wait
        p[2] = max(p[2], secs)
    return [tuple(p) for p in procs.values() if p[0] > 0 and p[2] > 0]


# A stall: a collective more than this many ms above its size's median in
# the same records (the 1 MiB all-reduce's middle half spans ~0.3 ms on the
# GPU host's cores, its stalls 3-8 ms; docs/predict.md "The collectives' tail").
STALL_MS = 2.0


PHASES = ("inside the backward", "the first after it", "later after it")


def bucket_times(run_root, loaded=None, transfer=False):
    """Per trial: [(bucket index, bytes, ms, phase)] over every step of every
    ok launch, rank 0's steps (transfer: the least over ranks, the N-rank
    run's collective without the wait for a late peer); loaded as in
    collect. The phase (PHASES) is where the collective started on rank 0's
    communication thread, rebuilt from the step's record: at its ready time
    (overlap off: the backward's end) or the previous one's end, whichever is
    later, against the backward's end."""
    out = defaultdict(list)
    for t in trials(run_root):
        for rp in t.get("repeats") or []:
            ranks = rp.get("ranks") or []
            if rp.get("outcome") != "ok" or not ranks:
                continue
            for s in ranks[0].get("steps") or []:
                if loaded is not None and ((s.get("interfere_gbps") or 0) > 0) != loaded:
                    continue
                bwd, end, after = s["backward_ms"], 0.0, 0
                for i, b in enumerate(s.get("buckets") or []):
                    ready = b.get("ready_ms")
                    start = max(bwd if ready is None or ready < 0 else ready, end)
                    end = start + b["ms"]
                    phase = PHASES[0] if start < bwd else PHASES[min(2, 1 + after)]
                    after += start >= bwd
                    ms = b.get("transfer_ms") if transfer and b.get("transfer_ms") else b["ms"]
                    out[key(t)].append((i, b["bytes"], ms, phase))
    return out


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def tails(root, n):
    """The collectives' spread: per trial and size, in the calibration and the
    N-rank run, the median, mean and 90th percentile of one collective and
    the share of stalls; per bucket index of the N-rank run, its stall share;
    per step, the summed buckets against the sum of their medians."""
    cal = bucket_times(root / f"cal{n}", loaded=True)
    real = bucket_times(root / f"r{n}", transfer=True)
    print(f"## The collectives' tail ({n} ranks; stall: more than {STALL_MS:g} ms above the size's median in the same records)")
    print("| trial | size | calibration: n, median, mean, p90, stalled | N-rank run (transfer): n, median, mean, p90, stalled |")
    print("|---|---|---|---|")
    for k in sorted(set(cal) | set(real)):
        for size in sorted({x[1] for x in cal.get(k, []) + real.get(k, [])}):
            cells = []
            for src in (cal.get(k, []), real.get(k, [])):
                xs = [x[2] for x in src if x[1] == size]
                if not xs:
                    cells.append("")
                    continue
                m = statistics.median(xs)
                st = sum(1 for x in xs if x > m + STALL_MS) / len(xs)
                cells.append(f"{len(xs)}, {m:.3f}, {statistics.mean(xs):.3f}, {quantile(xs, 0.9):.3f}, {100 * st:.1f}%")
            print(f"| {k} | {size} B | {cells[0]} | {cells[1]} |")
    print()
    print("Stalls by where the collective started (rank 0's record: inside the backward, the first after "
          "it, later; share stalled of the collectives there):")
    print()
    for what, src in (("calibration", cal), ("N-rank run", real)):
        for k in sorted(src):
            by = count_stalls(src[k], 3)
            print(f"- {what}, {k}: " + "; ".join(f"{p}: {100 * a / c:.0f}% of {c}" for p, (a, c) in by.items()))
    print()
    print("Stalls by bucket index in the N-rank run (share of its collectives; bucket 0 is the first issued):")
    print()
    for k in sorted(real):
        idx = count_stalls(real[k], 0)
        print(f"- {k}: " + ", ".join(f"{i}: {100 * a / c:.0f}%" for i, (a, c) in sorted(idx.items())))
    print()


def count_stalls(recs, field):
    """Per value of recs' field (bucket_times' tuples: 0 the index, 3 the
    phase): [stalled, collectives], a stall being more than STALL_MS above
    its size's median in recs."""
    sizes = defaultdict(list)
    for r in recs:
        sizes[r[1]].append(r[2])
    med_size = {b: statistics.median(v) for b, v in sizes.items()}
    out = defaultdict(lambda: [0, 0])
    for r in recs:
        out[r[field]][0] += r[2] > med_size[r[1]] + STALL_MS
        out[r[field]][1] += 1
    return out


def thread_waits(files):
    """Per process sampled in files: its thread that waited longest on a run
    queue, as (its CPU ms, its wait ms)."""
    worst = {}
    for proc, cpu, wait, _ in thread_deltas(files):
        if wait > worst.get(proc, (0, -1))[1]:
            worst[proc] = (cpu, wait)
    return list(worst.values())


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: predict-decompose.py OUT N")
    root, n = Path(sys.argv[1]), sys.argv[2]
    one = collect(root / f"one{n}")
    cal = collect(root / f"cal{n}", loaded=True)
    real = collect(root / f"r{n}")
    pred = predictions(root / f"predicted{n}.json")
    plain = predictions(root / f"predicted{n}-plain.json")  # the benchmark's fit, no calibration
    for k in sorted(set(one) | set(real)):
        o, c, r, p = one.get(k, {}), cal.get(k, {}), real.get(k, {}), pred.get(k)
        print(f"## {k} ({n} ranks)")
        print("| part | inputs (copies) | calibration (loaded) | N-rank run | model |")
        print("|---|---|---|---|---|")
        for part in ("forward_ms", "backward_ms", "tail_ms", "optimizer_ms"):
            m = ""
            if p and part != "tail_ms":
                m = f"{p['inputs'][part]:.2f}"
            print(f"| {part} | {med(o.get(part, [])):.2f} | {med(c.get(part, [])):.2f} | {med(r.get(part, [])):.2f} | {m} |")
        mp = f"{p['step_ms_median_profile']:.2f} (median profile)" if p else ""
        ms = f"{p['step_ms']:.2f}" if p else ""
        print(f"| step (median) | {med(o.get('step_ms', [])):.2f} | {med(c.get('step_ms', [])):.2f} | "
              f"{med(r.get('step_ms', [])):.2f} | {mp} |")
        print(f"| step (launch mean, slowest rank) | {med(o.get('launch_mean_slowest', [])):.2f} | | "
              f"{med(r.get('launch_mean_slowest', [])):.2f} | {ms} |")
        mc = f"{p['comm_ms']:.2f} (exposed {p['exposed_comm_ms']:.2f})" if p else ""
        print(f"| comm a step (summed buckets) | {med(o.get('comm_ms', [])):.2f} | {med(c.get('comm_ms', [])):.2f} | "
              f"{med(r.get('comm_ms', [])):.2f} (transfer {med(r.get('transfer_ms', [])):.2f}, skew {med(r.get('skew_ms', [])):.2f}) | {mc} |")
        print(f"| last bucket ready | {med(o.get('last_ready_ms', [])):.2f} | {med(c.get('last_ready_ms', [])):.2f} | "
              f"{med(r.get('last_ready_ms', [])):.2f} | |")
        print(f"| ranks' forward+backward end, spread | | | {med(r.get('bwd_end_spread', [])):.2f} | |")
        sizes = sorted({s for d in (o, c, r) for (tag, s) in [x for x in d if isinstance(x, tuple)]})
        model_size, fit_size = defaultdict(list), {}
        if p:
            for b in p["buckets"]:
                model_size[b["bytes"]].append((b["ms"], b.get("how", "")))
        for b in (plain.get(k) or {}).get("buckets") or []:
            fit_size[b["bytes"]] = b["ms"]
        for s in sizes:
            ms = model_size.get(s)
            m = f"{ms[0][0]:.3f} ({ms[0][1]})" if ms else ""
            if s in fit_size:
                m += f"; fit {fit_size[s]:.3f}"
            print(f"| one collective of {s} B (x{len(ms) if ms else '?'}) | {med(o.get(('size', s), [])):.3f} | "
                  f"{med(c.get(('size', s), [])):.3f} | {med(r.get(('size', s), [])):.3f} "
                  f"(transfer {med(r.get(('xfer', s), [])):.3f}) | {m} |")
        print()
    print("## Each rank's compute (forward + backward + optimizer, median ms a step)")
    print("| launch | trial | ranks | slowest / fastest rank |")
    print("|---|---|---|---|")
    for run, k, per in rank_compute(root / f"r{n}"):
        print(f"| {run} | {k} | {', '.join(f'{x:.1f}' for x in per)} | {spread(per)} |")
    copies = defaultdict(list)
    for run, k, per in rank_compute(root / f"one{n}"):
        copies[k].extend(per)
    for k in sorted(copies):
        v = copies[k]
        print(f"| inputs (every copy) | {k} | {', '.join(f'{x:.1f}' for x in v)} | {spread(v)} |")
    print()
    print("## Threads (scripts/sched-sample.sh; per process, medians over processes)")
    print("| runs | processes | CPUs busy (CPU s / s) | run-queue wait / (CPU + wait) |")
    print("|---|---|---|---|")
    waits = []  # each process's longest-waiting thread, printed after the table
    for kind, what in ((f"one{n}", "inputs (copies)"), (f"cal{n}", "calibration"), (f"r{n}", "N-rank run")):
        files = sorted(root.glob(f"sched-{kind}-*.txt"))
        rows, worst = sched(files), thread_waits(files)
        if rows:
            print(f"| {what} | {len(rows)} | {med([r[0] / 1e3 / r[2] for r in rows]):.2f} | "
                  f"{med([r[1] / (r[0] + r[1]) for r in rows]):.2f} |")
        if worst:
            waits.append(f"- {what}: {med([r[0] for r in worst]):.0f} ms on a CPU, {med([r[1] for r in worst]):.0f} ms "
                         f"waiting for one ({len(worst)} processes)")
    print()
    print("Each process's thread that waited longest on a run queue (medians over processes):")
    print()
    print("\n".join(waits))
    print()
    tails(root, n)


if __name__ == "__main__":
    main()
