#!/usr/bin/env python3
"""kernels: where a training step's GPU time goes, engine against reference.

profile_steps() runs a few more training steps under torch.profiler (CPU and
CUDA activities, no shapes, no stacks) and writes one JSON file: per kernel its
time and calls per step, the top kernels, the time per category of kernel
(gemm, attention, convolution, ...), the total kernel time per step and the gap
to the step time measured with CUDA events before (idle GPU: launch-bound or
host-bound), which kernel each memset follows and, on CUDA, the host's side:
launches and operators per step, their self CPU time and the operators that
take most of it (an eager step that is host-bound goes as fast as the host
issues it). Without a CUDA device it records the CPU operators' self times
instead. cs_bench.py (the engine) and the three references call it for
--profile FILE; a failure writes {"error": ...} to FILE and never stops the
benchmark.

The command line turns profiles into Markdown, one section per benchmark shape:

    python3 bench/reference/kernels.py GROUP ENGINE.json REFERENCE.json [GROUP ENGINE.json REFERENCE.json ...]
"""
import json
import os
import re
import sys
import time
import traceback

PROFILE_STEPS = 3  # steps profiled after the measured ones (cs_bench.py's too)
TOP = 40           # kernels kept in a profile file
HOST_TOP = 15      # host operators kept in a profile file
# The runtime calls that put work on a stream: each is one launch the host pays for.
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaMemcpyAsync", "cudaMemsetAsync", "cudaGraphLaunch")
NAME_MAX = 120     # characters of a kernel name kept

# Categories by kernel (or CPU operator) name, first match wins: one table with
# the Go side (profile/categories.json, package profile), so the engine's
# profiles in a run's report and these agree; profile/testdata/
# category_cases.tsv is the fixture both are tested against.
CATEGORIES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "profile", "categories.json")


def _load_categories(path=CATEGORIES_FILE):
    with open(path) as f:
        return [(c["name"], c["pattern"]) for c in json.load(f)["categories"]]


CATEGORIES = _load_categories()
_COMPILED = [(c, re.compile(p)) for c, p in CATEGORIES]


def category(name):
    """The category of a kernel or operator name (CATEGORIES, first match)."""
    return next(c for c, p in _COMPILED if p.search(name))


def summarize(events, steps, step_ms=None, profiled_step_ms=None, device="cuda", top=TOP):
    """The profile's fields from events, a list of (name, microseconds, calls)
    over `steps` steps (names may repeat): per-step times in ms, the top
    kernels, the categories and the idle gap: the step time less the kernel
    time, against step_ms (the measured steps' median) on CUDA, whose kernel
    times the profiler does not stretch, against the profiled steps' mean
    (profiled_step_ms) on the CPU, whose operators it does."""
    by_name = {}
    for name, us, calls in events:
        t = by_name.setdefault(name, [0.0, 0])
        t[0] += us
        t[1] += calls
    total_ms = sum(t[0] for t in by_name.values()) / 1e3 / steps
    share = (lambda ms: ms / total_ms) if total_ms > 0 else (lambda ms: 0.0)
    rows = sorted(((n, t[0] / 1e3 / steps, t[1] / steps) for n, t in by_name.items()),
                  key=lambda r: (-r[1], r[0]))
    cats = {}
    for n, ms, calls in rows:
        c = cats.setdefault(category(n), [0.0, 0.0])
        c[0] += ms
        c[1] += calls
    out = {
        "device": device,
        "time": "CUDA kernel time" if device == "cuda" else "CPU operator self time",
        "steps": steps,
        "kernel_ms": total_ms,
        "kernels_per_step": sum(r[2] for r in rows),
        "distinct_kernels": len(rows),
        "step_ms": step_ms,
        "profiled_step_ms": profiled_step_ms,
        "idle_ms": None, "idle_share": None, "idle_of": None,
        "categories": [{"category": c, "ms": v[0], "share": share(v[0]), "calls": v[1]}
                       for c, v in sorted(cats.items(), key=lambda kv: (-kv[1][0], kv[0]))],
        "top": [{"name": n[:NAME_MAX], "category": category(n), "calls": calls, "ms": ms, "share": share(ms)}
                for n, ms, calls in rows[:top]],
    }
    base, of = (step_ms, "measured") if device == "cuda" and step_ms else (profiled_step_ms, "profiled")
    if base:
        out["idle_ms"], out["idle_share"], out["idle_of"] = base - total_ms, (base - total_ms) / base, of
    return out


def _cuda_us(e):
    """A CUDA event's duration in microseconds (its interval; the attribute
    names changed in torch 2.4: device_time_total, before cuda_time_total)."""
    try:
        return e.time_range.elapsed_us()
    except AttributeError:
        for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
            v = getattr(e, attr, None)
            if v is not None:
                return v
    raise AttributeError("no CUDA time on profiler event %r" % getattr(e, "name", e))


def events_of(torch, prof, cuda):
    """(name, us, calls) of every CUDA kernel, copy and memset in prof; without
    CUDA, of every CPU operator's self time. record_function ranges (the
    optimizer's step, say) are mirrored on the GPU's timeline as CUDA events
    too: annotations, not kernels, left out: by their is_user_annotation flag
    where an event has one (torch 2.x), else when a CPU event has the same
    name. The flag decides where it exists: Inductor names the CPU range
    around each Triton kernel's launch after the kernel, so the name rule
    alone would drop every compiled model's fused kernels."""
    DeviceType = torch.autograd.DeviceType
    if not cuda:
        return [(r.key, r.self_cpu_time_total, r.count) for r in prof.key_averages()
                if getattr(r, "device_type", DeviceType.CPU) == DeviceType.CPU]
    try:
        return [(e.name, _cuda_us(e), 1) for e in _gpu_events(torch, prof)]
    except (AttributeError, TypeError):  # older or newer event objects: the averaged rows
        rows = list(prof.key_averages())
        cpu_names = {r.key for r in rows if getattr(r, "device_type", None) == DeviceType.CPU}
        return [(r.key, _cuda_us(r), r.count) for r in rows if getattr(r, "device_type", None) == DeviceType.CUDA
                and not _annotation(r, r.key, cpu_names)]


def host_ops(torch, prof, steps, top=HOST_TOP):
    """The host's side of the profiled steps, per step: stream launches (the
    runtime calls of LAUNCH_CALLS), aten/custom operators (rows whose name has
    "::"; nested ones count too), the self CPU time of every CPU row (the
    profiler's own cost per event included) and the top rows by it."""
    CPU = torch.autograd.DeviceType.CPU
    rows = [r for r in prof.key_averages() if getattr(r, "device_type", CPU) == CPU]
    per = float(max(steps, 1))
    self_ms = sum(r.self_cpu_time_total for r in rows) / 1e3 / per
    top_rows = sorted(rows, key=lambda r: (-r.self_cpu_time_total, r.key))[:top]
    return {
        "launches_per_step": sum(r.count for r in rows if r.key in LAUNCH_CALLS) / per,
        "operators_per_step": sum(r.count for r in rows if "::" in r.key) / per,
        "self_ms": self_ms,
        "top": [{"name": r.key[:NAME_MAX], "calls": r.count / per, "ms": r.self_cpu_time_total / 1e3 / per}
                for r in top_rows],
    }


def memsets_after(torch, prof, steps, top=10):
    """Which kernel each memset follows on the GPU's timeline, per step: a list
    of {"after": kernel name, "per_step": memsets}, most first. Memsets are
    cheap but each is a node of a CUDA graph and a gap between kernels; the
    kernel before one says which op asked for it. [] where the events carry
    no start times."""
    try:
        cuda = sorted(_gpu_events(torch, prof), key=lambda e: e.time_range.start)
    except (AttributeError, TypeError):
        return []
    counts, prev = {}, None
    for e in cuda:
        if e.name.startswith("Memset"):
            key = (prev or "(none)")[:NAME_MAX]
            counts[key] = counts.get(key, 0) + 1
        else:
            prev = e.name
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [{"after": k, "per_step": n / max(steps, 1)} for k, n in rows]


def _gpu_events(torch, prof):
    """prof's CUDA events that are kernels, copies or memsets: not the
    record_function ranges mirrored on the GPU (_annotation)."""
    DeviceType = torch.autograd.DeviceType
    evs = list(prof.events())
    cpu_names = {e.name for e in evs if e.device_type == DeviceType.CPU}
    return [e for e in evs if e.device_type == DeviceType.CUDA and not _annotation(e, e.name, cpu_names)]


def _annotation(e, name, cpu_names):
    """Whether a CUDA event is a record_function range mirrored on the GPU (events_of)."""
    flag = getattr(e, "is_user_annotation", None)
    return bool(flag) if flag is not None else name in cpu_names


def profile_steps(torch, step, path, steps=3, step_ms=None, prepare=None, timed_by_step=False, meta=None):
    """Runs `steps` more training steps under torch.profiler and writes the
    profile to path (summarize's fields and meta). step(prepare(i)) runs one
    step (prepare, when given, outside the step's timing); with timed_by_step it
    returns its own step time in ms (the engine's metrics), otherwise it is
    timed here (CUDA events, or the host clock without CUDA). step_ms is the
    median of the measured steps before, for the idle gap. Never raises: a
    failure writes {"error": ...} (and meta) to path. Returns whether it worked."""
    out = dict(meta or {})
    try:
        act = torch.profiler.ProfilerActivity
        cuda = torch.cuda.is_available()
        acts = [act.CPU] + ([act.CUDA] if cuda else [])
        times = []
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        with torch.profiler.profile(activities=acts, record_shapes=False, with_stack=False) as prof:
            for i in range(steps):
                arg = prepare(i) if prepare else i
                if cuda and not timed_by_step:
                    start.record()
                t = time.perf_counter()
                ms = step(arg)
                if timed_by_step:
                    times.append(float(ms))
                elif cuda:
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
                else:
                    times.append((time.perf_counter() - t) * 1e3)
            if cuda:
                torch.cuda.synchronize()
        t1 = time.perf_counter()
        events = events_of(torch, prof, cuda)
        if not events:
            raise RuntimeError("the profiler recorded no %s" % (
                "CUDA kernels (is CUPTI missing? the engine built against another libtorch?)" if cuda
                else "CPU operators"))
        out.update(summarize(events, steps, step_ms, sum(times) / len(times), "cuda" if cuda else "cpu"))
        if cuda:
            out["memsets_after"] = memsets_after(torch, prof, steps)
            out["host"] = host_ops(torch, prof, steps)
        out["torch"] = torch.__version__
        out["profile_s"], out["analysis_s"] = t1 - t0, time.perf_counter() - t1
        ok = True
    except Exception as e:  # the benchmark's line is out already; say what broke
        out["error"] = "%s: %s" % (type(e).__name__, e)
        out["traceback"] = traceback.format_exc(limit=8)
        ok = False
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(path + ".tmp", path)
    except OSError as e:
        print("kernels.py: cannot write the profile %s: %s" % (path, e), file=sys.stderr)
        return False
    if not ok:
        print("kernels.py: profiling failed, %s written with the error: %s" % (path, out["error"]), file=sys.stderr)
    return ok


def meta_of(line):
    """The fields of a benchmark line that name the run in its profile."""
    keys = ("name", "model", "precision", "micro_batch", "seq_len", "image_size", "channels_last", "config")
    return {k: line[k] for k in keys if k in line}


# ---- Markdown ---------------------------------------------------------------


def load(path):
    """A profile file, or {"error": ...} saying why there is none."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"error": "no profile (the run was skipped or failed: see its row in the tables above)"}
    except (OSError, ValueError) as e:
        return {"error": "unreadable profile %s: %s" % (os.path.basename(path), e)}


def _ms(x):
    return "–" if x is None else "%.2f" % x


def _pct(x):
    return "–" if x is None else "%.1f%%" % (100 * x)


def _count(x):
    return "–" if x is None else "%.0f" % x


def _code(name, n=100):
    name = name if len(name) <= n else name[:n - 1] + "…"
    return "`%s`" % name.replace("`", "'").replace("|", "\\|")


def _label(p, fallback):
    return p.get("name") or fallback


def compare(group, eng, ref, top=15):
    """Markdown lines comparing two profiles (summarize's fields, or {"error"})."""
    ln, rn = _label(eng, "engine"), _label(ref, "reference")
    lines = ["### %s: %s vs %s" % (group, ln, rn), ""]
    for label, p in ((ln, eng), (rn, ref)):
        if "error" in p:
            lines += ["- %s: %s" % (label, p["error"].splitlines()[0][:300])]
    if "error" in eng and "error" in ref:
        return lines + [""]
    if lines[-1] != "":
        lines.append("")
    sides = [p if "error" not in p else {} for p in (eng, ref)]
    what = next(p["time"] for p in sides if p)
    per = "CUDA events" if next(p["device"] for p in sides if p) == "cuda" else "host clock"
    lines += ["| per step | %s | %s |" % (ln, rn), "|---|---|---|",
              "| step ms (%s, measured steps) | %s | %s |" % (per, _ms(sides[0].get("step_ms")), _ms(sides[1].get("step_ms"))),
              "| %s ms | %s | %s |" % (what, _ms(sides[0].get("kernel_ms")), _ms(sides[1].get("kernel_ms"))),
              "| idle gap ms (%s step − %s) | %s (%s) | %s (%s) |" % (
                  next(p.get("idle_of") or "measured" for p in sides if p), "kernels" if per == "CUDA events" else "operators",
                  _ms(sides[0].get("idle_ms")), _pct(sides[0].get("idle_share")),
                  _ms(sides[1].get("idle_ms")), _pct(sides[1].get("idle_share"))),
              "| kernels per step | %s | %s |" % tuple(
                  "%.0f" % p["kernels_per_step"] if p else "–" for p in sides),
              "| profiled steps' ms | %s | %s |" % (_ms(sides[0].get("profiled_step_ms")),
                                                    _ms(sides[1].get("profiled_step_ms")))]
    hosts = [p.get("host") or {} for p in sides]
    if any(hosts):
        lines += ["| host: launches per step | %s | %s |" % tuple(_count(h.get("launches_per_step")) for h in hosts),
                  "| host: operators per step | %s | %s |" % tuple(_count(h.get("operators_per_step")) for h in hosts),
                  "| host: self CPU ms (profiled) | %s | %s |" % tuple(_ms(h.get("self_ms")) for h in hosts)]
    lines.append("")
    cats = {}
    for i, p in enumerate(sides):
        for c in p.get("categories", []):
            cats.setdefault(c["category"], [None, None])[i] = c
    lines += ["| category | %s ms | share | %s ms | share | difference ms |" % (ln, rn), "|---|---|---|---|---|---|"]
    for c, (e, r) in sorted(cats.items(), key=lambda kv: -max(x["ms"] if x else 0 for x in kv[1])):
        diff = (e["ms"] if e else 0) - (r["ms"] if r else 0)
        lines.append("| %s | %s | %s | %s | %s | %+.2f |" % (
            c, _ms(e and e["ms"]), _pct(e and e["share"]), _ms(r and r["ms"]), _pct(r and r["share"]), diff))
    lines.append("")
    for label, p in zip((ln, rn), sides):
        if not p:
            continue
        lines += ["Top %d of %s (of %d distinct):" % (min(top, len(p["top"])), label, p["distinct_kernels"]), "",
                  "| ms/step | share | calls/step | category | kernel |", "|---|---|---|---|---|"]
        lines += ["| %.2f | %s | %g | %s | %s |" % (k["ms"], _pct(k["share"]), round(k["calls"], 2),
                                                   k["category"], _code(k["name"])) for k in p["top"][:top]]
        lines.append("")
        if p.get("host", {}).get("top"):
            lines += ["Host operators of %s by self CPU time per step: %s" % (label, "; ".join(
                "%s %.2f ms in %g" % (_code(h["name"], 60), h["ms"], round(h["calls"], 1))
                for h in p["host"]["top"][:8])), ""]
        if p.get("memsets_after"):
            lines += ["Memsets of %s per step, by the kernel before them: %s" % (label, "; ".join(
                "%g after %s" % (round(m["per_step"], 2), _code(m["after"], 80)) for m in p["memsets_after"][:5])), ""]
    return lines


def markdown(triples, top=15):
    """The "Kernel profiles" section from (group, engine file, reference file) triples."""
    lines = ["## Kernel profiles", "",
             "Per step, averaged over the profiled steps (torch.profiler after the measured steps). "
             "The idle gap is the measured step time less the kernel time: time the GPU waits for "
             "the host (launch-bound) when large.", ""]
    for g, e, r in triples:
        lines += compare(g, load(e), load(r), top)
    return "\n".join(lines)


def main(argv):
    if not argv or len(argv) % 3:
        sys.exit("usage: kernels.py GROUP ENGINE.json REFERENCE.json [GROUP ENGINE.json REFERENCE.json ...]")
    print(markdown([tuple(argv[i:i + 3]) for i in range(0, len(argv), 3)]))


if __name__ == "__main__":
    main(sys.argv[1:])
