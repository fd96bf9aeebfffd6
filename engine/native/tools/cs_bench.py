#!/usr/bin/env python3
"""cs_bench: times the engine library through its C ABI (ctypes), no Go needed.

Loads libcasestudy_engine.so, creates an engine from any config JSON (any
family, preset, precision, graphs...), runs warm-up steps (discarded) and
measured steps, and prints one JSON line in the output contract of the PyTorch
references (bench/reference/README.md): median / p10 / p90 of the engine's own
step times (CUDA events on a GPU, the host clock on the CPU), samples/s and
tokens/s from the median step, TFLOP/s and MFU from the engine's FLOPs per
sample and peak, peak memory, the first and last loss; plus the per-phase
split of eager steps and what the engine chose (optimizer, attention, kernels,
cudnn); and what came before the measured steps: create_ms, first_step_ms
(host clock) and first_step_engine_ms. The steps run as a casestudy worker
runs them: the first alone, the rest of the warm-up in one cs_steps call, the
measured ones in calls of --steps-per-call (one wait for the device a call);
wall_ms_per_step is the host clock over the measured calls a step.

  python3 engine/native/tools/cs_bench.py --lib build/engine/libcasestudy_engine.so \\
      --name engine-bf16 --config '{"family":"gpt","preset":"124m","micro_batch":16,
      "seq_len":1024,"device":"cuda","precision":"bf16"}' --warmup 5 --steps 20

--profile FILE runs 3 more steps under torch.profiler after the measured ones
and writes where the GPU time went to FILE (bench/reference/kernels.py; CPU
operator times without CUDA). It imports torch before loading the library, so
that both share one libtorch and the profiler sees the engine's kernels: the
library must be built against that torch. Without --profile no torch is needed.
A profiling failure writes {"error": ...} to FILE; the benchmark line stands.

--launch measures one launch instead (no --warmup/--steps): loading the
library, cs_create with the phases the engine reports (info "init_phases":
device_init, model_build, optimizer, data_setup, comm_init), the first step
(cuDNN autotuning, lazy kernel loading), a second step, the parameter
checksum (cs_param_checksum, what a casestudy worker reads at its teardown)
and cs_destroy, as one JSON line {"name", "config", "device_name", "kernels",
"cudnn", "launch": {"load_ms", "create_ms", "init_phases", "first_step_ms",
"first_step_engine_ms", "second_step_ms", "checksum_ms", "destroy_ms"}} (wall
clock of this process; first_step_engine_ms is the engine's own step time).
--launch --first-step-ops FILE also runs the first step under torch.profiler
and writes its operators by self CPU time to FILE (a text table): where a
first step's host time goes (cuDNN plans, lazy loading, allocations). It
imports torch before loading the library, as --profile does, so its load_ms
and the profiled first step are not comparable with other launches ("profiled"
in the line).

Exit status: 0 ok; 1 an engine call failed (one JSON line with "error", the
status and the engine's message); 2 bad arguments.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

PROFILE_STEPS = 3  # as the references' (kernels.PROFILE_STEPS)
# bench/reference, where kernels.py (the profiler's summary) lives.
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "reference")


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return 0.0
    i = (len(xs) - 1) * q
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


class Engine:
    """The few C ABI calls a benchmark needs (engine/native/include/casestudy_engine.h):
    the engine allocates every answer and message, cs_free releases them."""

    ABI = 4  # CS_ABI_VERSION

    def __init__(self, path, name):
        self.name = name
        self.lib = ctypes.CDLL(path)
        P, C = ctypes.c_void_p, ctypes.c_char_p
        S = ctypes.POINTER(ctypes.c_void_p)  # char **, kept as a pointer to free it
        if self.lib.cs_abi_version() != self.ABI:
            raise OSError("ABI version %d, cs_bench.py speaks %d" % (self.lib.cs_abi_version(), self.ABI))
        self.lib.cs_create.argtypes = [C, ctypes.POINTER(P), S]
        for f in (self.lib.cs_info, self.lib.cs_step, self.lib.cs_param_checksum):
            f.argtypes = [P, S, S]
        self.lib.cs_steps.argtypes = [P, C, S, S]
        self.lib.cs_destroy.argtypes = [P, S]
        self.lib.cs_free.argtypes = [P]
        self.lib.cs_free.restype = None
        self.h = ctypes.c_void_p()

    def take(self, p):
        """The engine's string at p (a c_void_p) as str ("" for NULL), released."""
        if not p.value:
            return ""
        s = ctypes.string_at(p.value).decode(errors="replace")
        self.lib.cs_free(p)
        return s

    def fail(self, what, st, msg):
        print(json.dumps({"name": self.name, "error": what, "status": st, "message": msg}), flush=True)
        sys.exit(1)

    def create(self, config):
        err = ctypes.c_void_p()
        st = self.lib.cs_create(config.encode(), ctypes.byref(self.h), ctypes.byref(err))
        if st != 0:
            self.fail("cs_create", st, self.take(err))

    def call(self, fn, what, exit_on_error=True):
        out, err = ctypes.c_void_p(), ctypes.c_void_p()
        st = fn(self.h, ctypes.byref(out), ctypes.byref(err))
        text, msg = self.take(out), self.take(err)
        if st != 0:
            if exit_on_error:
                self.fail(what, st, msg)
            raise RuntimeError("%s: status %d: %s" % (what, st, msg))
        return json.loads(text)

    def steps(self, n, what):
        """n steps in one cs_steps call (one wait for the device, after the last)."""
        req = json.dumps({"steps": n}).encode()
        return self.call(lambda h, out, err: self.lib.cs_steps(h, req, out, err), what)

    def destroy(self):
        err = ctypes.c_void_p()
        st = self.lib.cs_destroy(self.h, ctypes.byref(err))
        msg = self.take(err)
        if st != 0:
            print("cs_bench.py: cs_destroy: status %d: %s" % (st, msg), file=sys.stderr)


def summarize(name, cfg, info, steps, warmup):
    """The contract's fields from cs_info and the cs_step metrics."""
    m = steps[warmup:]
    ms = [s["step_ms"] for s in m]
    med = statistics.median(ms)
    samples = m[0]["samples"]
    samples_s = samples / (med / 1e3)
    fps = info.get("flops_per_sample") or 0.0
    tflops = samples_s * fps / 1e12
    peak = info.get("peak_tflops") or 0.0
    shapes = info.get("shapes", {})
    family, preset = info.get("family"), info.get("preset")
    graphed = all(s.get("graphed") for s in m)
    eager = [s for s in m if not s.get("graphed")]
    res = {
        "name": name,
        "model": "resnet50" if family == "resnet50" else f"{family}-{preset}",
        "reference": "casestudy engine",
        "device_name": info.get("device_name"), "torch": info.get("torch"),
        "precision": info.get("precision"), "micro_batch": shapes.get("micro_batch", cfg.get("micro_batch")),
    }
    if info.get("tokens_per_sample"):
        res["seq_len"] = shapes.get("seq_len", info["tokens_per_sample"])
    else:
        res["image_size"] = shapes.get("image_size")
        res["channels_last"] = bool(cfg.get("channels_last"))
    res.update({
        "config": cfg, "graphs": bool(info.get("graphs")), "graphed": graphed,
        "optimizer": info.get("optimizer"), "attention": info.get("attention"),
        "kernels": info.get("kernels"), "cudnn": info.get("cudnn"),
        # The copies of cuDNN, NCCL, cuBLAS, ... this process ran (a GPU rank's info).
        "cudnn_runtime": info.get("cudnn_runtime"), "libraries": info.get("libraries"),
        "params": info.get("params"), "flops_per_sample": fps,
        "warmup": warmup, "steps": len(m),
        "step_ms": {"median": med, "p10": pct(ms, 0.1), "p90": pct(ms, 0.9)},
        "samples_per_s": samples_s,
        "tokens_per_s": samples_s * (info.get("tokens_per_sample") or 0),
        "tflops": tflops, "peak_tflops": peak, "mfu": tflops / peak if peak else 0.0,
        # Replayed steps have no split; a graphed run reports none.
        "eager_phase_ms": {k: statistics.median([s[k] for s in eager])
                           for k in ("forward_ms", "backward_ms", "optimizer_ms")} if eager else None,
        # After capture the peak counts only what was allocated since the
        # graph's private pool was set up: not comparable with eager runs.
        "mem_peak_bytes": max(s["mem_peak_bytes"] for s in m),
        "mem_reserved_bytes": max(s["mem_reserved_bytes"] for s in m),
        "loss_first": steps[0]["loss"], "loss_last": steps[-1]["loss"],
        "skipped": sum(1 for s in steps if s.get("skipped")),
    })
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="path of libcasestudy_engine.so")
    ap.add_argument("--config", required=True, help="engine config JSON (engine/config.go's fields)")
    ap.add_argument("--name", default="engine", help="the run's name in the output line")
    ap.add_argument("--warmup", type=int, default=5, help="discarded steps")
    ap.add_argument("--steps", type=int, default=20, help="measured steps")
    ap.add_argument("--steps-per-call", type=int, default=20,
                    help="measured steps issued in one cs_steps call, one wait for the device a call "
                    "(20: as a casestudy worker; 1: a wait after every step)")
    ap.add_argument("--profile", metavar="FILE",
                    help="after the measured steps, profile %d more and write the kernel summary JSON to FILE"
                    % PROFILE_STEPS)
    ap.add_argument("--launch", action="store_true",
                    help="time one launch (load, cs_create by phase, first step, cs_destroy) instead")
    ap.add_argument("--first-step-ops", metavar="FILE",
                    help="with --launch: profile the first step, its operators by self CPU time to FILE")
    ap.add_argument("--losses", metavar="FILE",
                    help="write every step's loss (warm-up included) as JSON to FILE "
                    "(name, config, kernels, losses; engine/native/tools/losscurve.py)")
    a = ap.parse_args(argv)
    try:
        cfg = json.loads(a.config)
    except json.JSONDecodeError as e:
        ap.error(f"--config is not JSON: {e}")
    if not isinstance(cfg, dict):
        ap.error("--config must be a JSON object")
    if a.steps < 1 or a.warmup < 0 or not 1 <= a.steps_per_call <= 1000:
        ap.error("--steps must be at least 1, --warmup at least 0, --steps-per-call 1..1000")
    if a.launch:
        if a.profile:
            ap.error("--launch and --profile do not mix")
        launch(a, cfg)
        return
    if a.first_step_ops:
        ap.error("--first-step-ops needs --launch")
    torch = no_torch = None
    if a.profile:
        try:  # before the library: one libtorch for both, so the profiler sees the engine
            import torch
        except ImportError as e:
            print("cs_bench.py: --profile needs torch (%s); the benchmark runs without it" % e, file=sys.stderr)
            no_torch = "--profile needs torch: %s" % e
    try:
        eng = Engine(a.lib, a.name)
    except OSError as e:
        ap.error(f"--lib {a.lib}: {e} (build it with make engine)")

    t = time.perf_counter()
    eng.create(json.dumps(cfg))
    create_ms = (time.perf_counter() - t) * 1e3
    info = eng.call(eng.lib.cs_info, "cs_info")
    t = time.perf_counter()
    steps = [eng.call(eng.lib.cs_step, "cs_step 0")]
    first_ms = (time.perf_counter() - t) * 1e3
    # As a casestudy worker (runner/stepcalls.go): the rest of the warm-up in
    # one call, then the measured steps in calls of --steps-per-call.
    if a.warmup > 1:
        steps += eng.steps(a.warmup - 1, "cs_steps (warm-up)")
    total = a.warmup + a.steps
    t = time.perf_counter()
    while len(steps) < total:
        n = min(a.steps_per_call, total - len(steps))
        steps += eng.steps(n, "cs_steps %d..%d" % (len(steps), len(steps) + n - 1))
    wall_ms = (time.perf_counter() - t) * 1e3
    timed_calls = total - max(a.warmup, 1)  # steps in the calls after the warm-up
    line = summarize(a.name, cfg, info, steps, a.warmup)
    # The host clock over the measured calls: what the events' steps add up to,
    # plus each call's start on an idle device and its answer.
    line.update({"steps_per_call": a.steps_per_call,
                 "wall_ms_per_step": wall_ms / timed_calls if timed_calls else None})
    # What starting cost (not part of the measured steps): cs_create and the
    # first step by the host clock (autotuning, lazy loading), and the
    # engine's own time of that step.
    line.update({"create_ms": create_ms, "first_step_ms": first_ms,
                 "first_step_engine_ms": steps[0]["step_ms"]})
    print(json.dumps(line), flush=True)
    if a.losses:
        with open(a.losses + ".tmp", "w") as f:
            json.dump({"name": a.name, "config": cfg, "kernels": info.get("kernels"),
                       "losses": [s["loss"] for s in steps]}, f)
        os.replace(a.losses + ".tmp", a.losses)
    if a.profile:
        try:
            profile(eng, torch, no_torch, a.profile, line)
        except Exception as e:  # the line is out: say what broke, exit 0
            print("cs_bench.py: --profile %s: %s: %s" % (a.profile, type(e).__name__, e), file=sys.stderr)
    eng.destroy()


def launch(a, cfg):
    """One launch, timed by its parts (--launch)."""
    def ms(t0):
        return (time.perf_counter() - t0) * 1e3

    torch = None
    if a.first_step_ops:  # before the library, as for --profile: one libtorch for both
        import torch
        import torch.profiler
    t = time.perf_counter()
    try:
        eng = Engine(a.lib, a.name)
    except OSError as e:
        print(json.dumps({"name": a.name, "error": "load", "status": -1, "message": str(e)}), flush=True)
        sys.exit(1)
    load_ms, t = ms(t), time.perf_counter()
    eng.create(json.dumps(cfg))
    create_ms = ms(t)
    info = eng.call(eng.lib.cs_info, "cs_info")
    prof = None
    if torch is not None:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
        prof.__enter__()
    t = time.perf_counter()
    step = eng.call(eng.lib.cs_step, "cs_step 0")
    first_ms, t = ms(t), time.perf_counter()
    if prof is not None:
        prof.__exit__(None, None, None)
        write_first_step_ops(prof, a.first_step_ops, a.name, first_ms)
        t = time.perf_counter()
    eng.call(eng.lib.cs_step, "cs_step 1")
    second_ms, t = ms(t), time.perf_counter()
    eng.call(eng.lib.cs_param_checksum, "cs_param_checksum")
    checksum_ms, t = ms(t), time.perf_counter()
    eng.destroy()
    print(json.dumps({"name": a.name, "config": cfg, "device_name": info.get("device_name"),
                      "kernels": info.get("kernels"), "cudnn": info.get("cudnn"), "launch": {
        "load_ms": load_ms, "create_ms": create_ms, "init_phases": info.get("init_phases"),
        "first_step_ms": first_ms, "first_step_engine_ms": step.get("step_ms"),
        "second_step_ms": second_ms, "checksum_ms": checksum_ms, "destroy_ms": ms(t),
        "profiled": prof is not None}}), flush=True)


FIRST_STEP_OPS = 30  # rows of the --first-step-ops table


def write_first_step_ops(prof, path, name, first_ms):
    """The profiled first step's operators by self CPU time (--first-step-ops)."""
    avgs = prof.key_averages()
    total_us = sum(e.self_cpu_time_total for e in avgs)
    rows = sorted(avgs, key=lambda e: e.self_cpu_time_total, reverse=True)[:FIRST_STEP_OPS]
    with open(path, "w") as f:
        f.write("%s: first step %.0f ms (profiled), operators' self CPU time %.0f ms\n"
                % (name, first_ms, total_us / 1e3))
        f.write("%10s %7s %6s  %s\n" % ("self ms", "share", "calls", "operator"))
        for e in rows:
            f.write("%10.1f %6.1f%% %6d  %s\n" % (e.self_cpu_time_total / 1e3,
                    100.0 * e.self_cpu_time_total / max(total_us, 1), e.count, e.key[:110]))


def profile(eng, torch, no_torch, path, line):
    """PROFILE_STEPS more steps under torch.profiler into path (kernels.py);
    without torch, a file that says so (no_torch)."""
    sys.path.insert(0, REFERENCE_DIR)
    import kernels

    meta = kernels.meta_of(line)
    if no_torch:
        with open(path, "w") as f:
            json.dump(dict(meta, error=no_torch), f)
        return
    kernels.profile_steps(
        torch, lambda i: eng.call(eng.lib.cs_step, "cs_step (profiled) %d" % i, exit_on_error=False)["step_ms"],
        path, PROFILE_STEPS, step_ms=line["step_ms"]["median"], timed_by_step=True, meta=meta)


if __name__ == "__main__":
    main()
