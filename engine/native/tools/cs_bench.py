#!/usr/bin/env python3
"""cs_bench: times the engine library through its C ABI (ctypes), no Go needed.

Loads libcasestudy_engine.so, creates an engine from a config JSON, runs warm-up
steps (discarded) and measured steps, and prints one JSON line: median / p10 / p90
step time, tokens/s, TFLOP/s and MFU (the engine's own per-step metrics), the
per-phase split of the eager steps, memory, and the first and last loss.

  python3 engine/native/tools/cs_bench.py --lib build/engine/libcasestudy_engine.so \
      --name bf16 --config '{"family":"gpt","preset":"124m","micro_batch":16,
      "device":"cuda","precision":"bf16"}' --warmup 5 --steps 20
Exit status: 0 ok, 1 an engine call failed (its status and message are printed).
"""
import argparse
import ctypes
import json
import statistics
import sys

BUF = 1 << 20


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return 0.0
    i = (len(xs) - 1) * q
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--config", required=True, help="engine config JSON")
    ap.add_argument("--name", default="engine")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()

    lib = ctypes.CDLL(a.lib)
    P, S, C = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    lib.cs_create.argtypes = [C, ctypes.POINTER(P), C, S]
    for f in (lib.cs_info, lib.cs_step):
        f.argtypes = [P, C, S, C, S]
    lib.cs_destroy.argtypes = [P, C, S]
    out = ctypes.create_string_buffer(BUF)
    err = ctypes.create_string_buffer(4096)
    eng = ctypes.c_void_p()

    def fail(what, st):
        print(json.dumps({"name": a.name, "error": what, "status": st,
                          "message": err.value.decode(errors="replace")}))
        sys.exit(1)

    st = lib.cs_create(a.config.encode(), ctypes.byref(eng), err, len(err))
    if st != 0:
        fail("cs_create", st)
    st = lib.cs_info(eng, out, BUF, err, len(err))
    if st != 0:
        fail("cs_info", st)
    info = json.loads(out.value)
    steps = []
    for i in range(a.warmup + a.steps):
        st = lib.cs_step(eng, out, BUF, err, len(err))
        if st != 0:
            fail("cs_step %d" % i, st)
        steps.append(json.loads(out.value))
    lib.cs_destroy(eng, err, len(err))

    m = steps[a.warmup:]
    ms = [s["step_ms"] for s in m]
    med = statistics.median(ms)
    eager = [s for s in m if not s.get("graphed")] or [s for s in steps[1:a.warmup]]
    phase = {k: statistics.median([s[k] for s in eager]) if eager else 0.0
             for k in ("forward_ms", "backward_ms", "optimizer_ms")}
    res = {
        "name": a.name,
        "config": json.loads(a.config),
        "device_name": info.get("device_name"),
        "params": info.get("params"),
        "flops_per_sample": info.get("flops_per_sample"),
        "optimizer": info.get("optimizer"),
        "attention": info.get("attention"),
        "peak_tflops": info.get("peak_tflops"),
        "warmup": a.warmup,
        "steps": a.steps,
        "step_ms": {"median": med, "p10": pct(ms, 0.1), "p90": pct(ms, 0.9)},
        "tokens_per_s": statistics.median([s["tokens_per_s"] for s in m]),
        "samples_per_s": statistics.median([s["samples_per_s"] for s in m]),
        "tflops": statistics.median([s["tflops"] for s in m]),
        "mfu": statistics.median([s["mfu"] for s in m]),
        "graphed": all(s.get("graphed") for s in m),
        "eager_phase_ms": phase,
        "mem_peak_bytes": max(s["mem_peak_bytes"] for s in m),
        "mem_reserved_bytes": max(s["mem_reserved_bytes"] for s in m),
        "loss_first": steps[0]["loss"],
        "loss_last": steps[-1]["loss"],
        "skipped": sum(1 for s in steps if s.get("skipped")),
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
