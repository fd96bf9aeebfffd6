#!/usr/bin/env python3
"""host_probe.py: how fast this machine's host issues work to the GPU.

An eager training step whose kernels are short (BERT-large at 128 tokens) takes
as long as the host needs to issue it, so eager step times are comparable
across machines only together with the host's speed. This times PyTorch's eager
dispatch of a tiny CUDA op (an in-place add on one element, whose kernel takes
a few microseconds): ROUNDS rounds of LAUNCHES launches, host time per launch,
median and spread over the rounds, the GPU drained before each round. Prints
one line of JSON (and a readable line on stderr).

    python3 host_probe.py [--launches 2000] [--rounds 7]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def probe(launches, rounds):
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("host_probe.py: no CUDA device")
    x = torch.zeros(1, device="cuda")
    for _ in range(200):  # warm-up: the kernel loaded, the allocator settled
        x.add_(1)
    torch.cuda.synchronize()
    per_launch_us = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            x.add_(1)
        per_launch_us.append((time.perf_counter() - t0) / launches * 1e6)
    torch.cuda.synchronize()
    per_launch_us.sort()
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "load_1min": os.getloadavg()[0],
        "launches": launches,
        "rounds": rounds,
        "launch_us": {
            "median": statistics.median(per_launch_us),
            "min": per_launch_us[0],
            "max": per_launch_us[-1],
        },
        "torch": torch.__version__,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    if a.launches < 1 or a.rounds < 1:
        ap.error("--launches and --rounds must be at least 1")
    r = probe(a.launches, a.rounds)
    print(json.dumps(r))
    u = r["launch_us"]
    print(f"host: {u['median']:.2f} µs per eager launch of a tiny CUDA op (min {u['min']:.2f}, "
          f"max {u['max']:.2f}; {r['cpu']}, {r['cpus']} CPUs, load {r['load_1min']:.1f})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
