"""What the three PyTorch reference benchmarks share: the step timing loop
(CUDA events, warm-up discarded), the step-time summary, the peak table for MFU,
the --mode choices and each mode's --profile file. The scripts import it from
their own folder."""

import os
import statistics

# --mode: which models run, in order (compiled or not).
MODES = {"eager": [False], "compile": [True], "both": [False, True]}


def mode_path(path, compiled, modes):
    """The profile file of one mode of a run: path itself when it profiles one
    mode, the compiled model's with -compile before the extension when both."""
    if not compiled or len(modes) < 2:
        return path
    base, ext = os.path.splitext(path)
    return base + "-compile" + (ext or ".json")


# Dense peaks (TFLOP/s, no sparsity) by device name, as the engine's table; the
# first matching name wins, so the more specific names come first.
PEAKS = {
    "bf16": [("H200", 989.4), ("H100 PCIe", 756.4), ("H100 NVL", 835.5), ("H100", 989.4),
             ("A100", 312.0), ("L40S", 362.05)],
    "fp32": [("H200", 66.9), ("H100 PCIe", 51.2), ("H100 NVL", 60.0), ("H100", 66.9),
             ("A100", 19.5)],
}


def peak_tflops(name, override=0.0, precision="bf16"):
    """The device's dense peak for precision, or override when it is set; 0 when unknown."""
    if override and override > 0:
        return override
    return next((tf for key, tf in PEAKS[precision] if key in name), 0.0)


def pct(xs, q):
    """The q-quantile of xs with linear interpolation."""
    xs = sorted(xs)
    i = (len(xs) - 1) * q
    lo, hi = int(i), min(int(i) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def step_ms(times):
    """The step-time summary of the output line: median, p10, p90 (ms)."""
    return {"median": statistics.median(times), "p10": pct(times, 0.1), "p90": pct(times, 0.9)}


def time_steps(torch, step, warmup, steps, prepare=None):
    """Runs warmup + steps training steps, each timed with CUDA events around
    step(i) (prepare(i), when given, runs before the timer starts and its result
    is passed to step). Peak memory statistics restart after the warm-up.
    Returns (measured step times in ms, every step's loss)."""
    times, losses = [], []
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for i in range(warmup + steps):
        if i == warmup:
            torch.cuda.reset_peak_memory_stats()
        arg = prepare(i) if prepare else i
        start.record()
        loss = step(arg)
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
        losses.append(loss.item())
    return times, losses


def measured_fields(torch, dev, times, losses, micro_batch, flops_per_sample, tokens_per_sample, peak):
    """The output line's measured fields (bench/reference/README.md) from the
    measured step times (ms) and every step's loss: step_ms, samples_per_s and
    tokens_per_s from the median step, tflops, peak_tflops, mfu, mem_peak_bytes,
    loss_first, loss_last."""
    samples_s = micro_batch / (statistics.median(times) / 1e3)
    tflops = samples_s * flops_per_sample / 1e12
    return {
        "step_ms": step_ms(times),
        "samples_per_s": samples_s, "tokens_per_s": samples_s * tokens_per_sample,
        "tflops": tflops, "peak_tflops": peak, "mfu": tflops / peak if peak else 0.0,
        "mem_peak_bytes": torch.cuda.max_memory_allocated(dev),
        "loss_first": losses[0], "loss_last": losses[-1],
    }


def profiler(torch, step, res, prepare=None):
    """The profile hook a reference's bench() returns: profile(path) runs
    kernels.PROFILE_STEPS more steps under torch.profiler and writes path
    (bench/reference/kernels.py), with res's median step as the measured one."""

    def profile(path):
        import kernels
        kernels.profile_steps(torch, step, path, kernels.PROFILE_STEPS, step_ms=res["step_ms"]["median"],
                              prepare=prepare, meta=kernels.meta_of(res))

    return profile
