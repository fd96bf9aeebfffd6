"""Tests of kernels.py: categories, the per-step summary, the profiler's events,
failures and the Markdown, on synthetic profiles; and cs_bench.py --profile end
to end on the CPU engine where a python with torch and the library exist
(python3 -m unittest discover -s bench/reference; make test runs it)."""

import enum
import functools
import json
import os
import subprocess
import sys
import tempfile
import types
import unittest

import kernels
from test_common import fake_event

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class CategoryTest(unittest.TestCase):
    # The fixture the Go side (profile/categories_test.go) checks too: one table,
    # one set of cases, so both categorise alike.
    CASES_FILE = os.path.join(ROOT, "profile", "testdata", "category_cases.tsv")

    def cases(self):
        with open(self.CASES_FILE) as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
        self.assertGreater(len(rows), 40)
        return rows

    def test_categories(self):
        for name, want in self.cases():
            with self.subTest(name=name):
                self.assertEqual(kernels.category(name), want)

    def test_every_category_is_named(self):
        names = [c for c, _ in kernels.CATEGORIES]
        self.assertEqual(names[-1], "other", "the catch-all is last")
        self.assertEqual(len(set(names)), len(names))


# 2 steps: gemm 6 ms, attention 2 ms, elementwise 1 ms, memset 1 ms per step.
EVENTS = [
    ("nvjet_tst_192x192", 4000.0, 4), ("nvjet_tst_192x192", 4000.0, 4),
    ("ampere_bf16_s16816gemm", 4000.0, 2),
    ("flash_fwd_kernel", 4000.0, 24),
    ("vectorized_elementwise_kernel<4, GeluFunctor>", 2000.0, 10),
    ("Memset (Device)", 2000.0, 6),
]


class SummarizeTest(unittest.TestCase):
    def test_per_step_times_and_shares(self):
        p = kernels.summarize(EVENTS, 2, step_ms=12.5, profiled_step_ms=14.0)
        self.assertAlmostEqual(p["kernel_ms"], 10.0)
        self.assertEqual(p["distinct_kernels"], 5)
        self.assertAlmostEqual(p["kernels_per_step"], 25.0)
        top = p["top"][0]
        self.assertEqual((top["name"], top["category"]), ("nvjet_tst_192x192", "gemm/matmul"))
        self.assertAlmostEqual(top["ms"], 4.0, msg="repeated names add up")
        self.assertAlmostEqual(top["calls"], 4.0)
        self.assertAlmostEqual(top["share"], 0.4)
        self.assertEqual([k["ms"] for k in p["top"]], sorted((k["ms"] for k in p["top"]), reverse=True))
        cats = {c["category"]: c for c in p["categories"]}
        self.assertAlmostEqual(cats["gemm/matmul"]["ms"], 6.0)
        self.assertAlmostEqual(cats["attention"]["calls"], 12.0)
        self.assertAlmostEqual(sum(c["ms"] for c in p["categories"]), p["kernel_ms"])
        self.assertAlmostEqual(sum(c["share"] for c in p["categories"]), 1.0)
        self.assertEqual(p["categories"][0]["category"], "gemm/matmul", "largest first")

    def test_idle_gap_is_against_the_measured_step_on_cuda(self):
        p = kernels.summarize(EVENTS, 2, step_ms=12.5, profiled_step_ms=14.0)
        self.assertAlmostEqual(p["idle_ms"], 2.5)
        self.assertAlmostEqual(p["idle_share"], 0.2)
        self.assertEqual(p["idle_of"], "measured")

    def test_idle_gap_is_against_the_profiled_step_on_cpu(self):
        p = kernels.summarize(EVENTS, 2, step_ms=8.0, profiled_step_ms=12.0, device="cpu")
        self.assertAlmostEqual(p["idle_ms"], 2.0)
        self.assertEqual((p["idle_of"], p["time"]), ("profiled", "CPU operator self time"))

    def test_top_and_name_limits(self):
        evs = [("k%03d" % i + "x" * 200, float(i + 1), 1) for i in range(60)]
        p = kernels.summarize(evs, 1)
        self.assertEqual(len(p["top"]), kernels.TOP)
        self.assertTrue(all(len(k["name"]) == kernels.NAME_MAX for k in p["top"]))
        self.assertTrue(p["top"][0]["name"].startswith("k059"))
        self.assertIsNone(p["idle_ms"], "no step time: no gap")

    def test_no_events(self):
        p = kernels.summarize([], 3, step_ms=5.0)
        self.assertEqual((p["kernel_ms"], p["top"], p["categories"]), (0.0, [], []))


class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1


class Interval:
    def __init__(self, us, start=0):
        self.us, self.start = us, start

    def elapsed_us(self):
        return self.us


def ev(name, device, us, annotation=None, start=0):
    e = types.SimpleNamespace(name=name, device_type=device, time_range=Interval(us, start))
    if annotation is not None:
        e.is_user_annotation = annotation
    return e


class FakeProfile:
    """torch.profiler.profile's stand-in: records nothing, returns given events."""

    def __init__(self, evs, rows=(), fail=None):
        self.evs, self.rows, self.fail = evs, rows, fail

    def __call__(self, activities, record_shapes, with_stack):
        assert not record_shapes and not with_stack
        self.activities = activities
        return self

    def __enter__(self):
        if self.fail:
            raise self.fail
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return self.evs

    def key_averages(self):
        return self.rows


def fake_torch(prof, cuda=True):
    times = iter([7.0, 9.0, 11.0])
    Event = fake_event(lambda: next(times))

    cudamod = types.SimpleNamespace(is_available=lambda: cuda, Event=Event, synchronize=lambda: None)
    profiler = types.SimpleNamespace(profile=prof, ProfilerActivity=types.SimpleNamespace(CPU="cpu", CUDA="cuda"))
    return types.SimpleNamespace(cuda=cudamod, profiler=profiler, autograd=types.SimpleNamespace(DeviceType=DeviceType),
                                 __version__="fake")


class EventsTest(unittest.TestCase):
    def test_kernels_without_annotations(self):
        prof = FakeProfile([
            ev("aten::mm", DeviceType.CPU, 50),
            ev("cudaLaunchKernel", DeviceType.CPU, 5),
            ev("nvjet_tst", DeviceType.CUDA, 300),
            ev("Optimizer.step#AdamW.step", DeviceType.CPU, 900),
            ev("Optimizer.step#AdamW.step", DeviceType.CUDA, 800, annotation=True),
            ev("## forward ##", DeviceType.CPU, 10),
            ev("## forward ##", DeviceType.CUDA, 700),  # an annotation of a torch without the flag
            ev("Memset (Device)", DeviceType.CUDA, 2, annotation=False),
            # Inductor: a CPU range named after the Triton kernel it launches
            ev("triton_per_fused_native_layer_norm_0", DeviceType.CPU, 4),
            ev("triton_per_fused_native_layer_norm_0", DeviceType.CUDA, 40, annotation=False),
        ])
        got = kernels.events_of(fake_torch(prof), prof, cuda=True)
        self.assertEqual(got, [("nvjet_tst", 300, 1), ("Memset (Device)", 2, 1),
                               ("triton_per_fused_native_layer_norm_0", 40, 1)])

    def test_memsets_after_their_kernel(self):
        # Two steps, out of time order in the list: per step, one memset after
        # the attention kernel, two after the gemm; annotations and CPU events
        # between them do not count as the kernel before.
        prof = FakeProfile([
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=21),
            ev("flash_bwd", DeviceType.CUDA, 9, annotation=False, start=20),
            ev("nvjet_tst", DeviceType.CUDA, 9, annotation=False, start=10),
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=11),
            ev("Optimizer.step#AdamW.step", DeviceType.CUDA, 800, annotation=True, start=12),
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=13),
            ev("aten::zero_", DeviceType.CPU, 1, start=12),
            ev("nvjet_tst", DeviceType.CUDA, 9, annotation=False, start=30),
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=31),
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=32),
            ev("flash_bwd", DeviceType.CUDA, 9, annotation=False, start=40),
            ev("Memset (Device)", DeviceType.CUDA, 1, annotation=False, start=41),
        ])
        got = kernels.memsets_after(fake_torch(prof), prof, steps=2)
        self.assertEqual(got, [{"after": "nvjet_tst", "per_step": 2.0}, {"after": "flash_bwd", "per_step": 1.0}])
        bare = FakeProfile([types.SimpleNamespace(name="Memset (Device)", device_type=DeviceType.CUDA)])
        self.assertEqual(kernels.memsets_after(fake_torch(bare), bare, steps=1), [], "no start times: nothing")

    def test_averaged_rows_when_events_have_no_interval(self):
        rows = [types.SimpleNamespace(key="aten::mm", device_type=DeviceType.CPU, count=3),
                types.SimpleNamespace(key="gemm_k", device_type=DeviceType.CUDA, count=3, self_device_time_total=90.0),
                types.SimpleNamespace(key="old_k", device_type=DeviceType.CUDA, count=1, self_cuda_time_total=7.0)]
        prof = FakeProfile([types.SimpleNamespace(name="k", device_type=DeviceType.CUDA)], rows)
        got = kernels.events_of(fake_torch(prof), prof, cuda=True)
        self.assertEqual(got, [("gemm_k", 90.0, 3), ("old_k", 7.0, 1)])

    def test_cpu_operators_self_time(self):
        rows = [types.SimpleNamespace(key="aten::mm", device_type=DeviceType.CPU, count=6, self_cpu_time_total=600.0),
                types.SimpleNamespace(key="k", device_type=DeviceType.CUDA, count=1, self_cpu_time_total=0.0)]
        prof = FakeProfile([], rows)
        self.assertEqual(kernels.events_of(fake_torch(prof, cuda=False), prof, cuda=False), [("aten::mm", 600.0, 6)])


class HostOpsTest(unittest.TestCase):
    def test_launches_operators_and_self_time_per_step(self):
        def row(key, count, us, device=DeviceType.CPU):
            return types.SimpleNamespace(key=key, device_type=device, count=count, self_cpu_time_total=us)
        prof = FakeProfile([], [row("aten::addmm", 20, 400.0), row("aten::linear", 20, 100.0),
                                row("cudaLaunchKernel", 30, 300.0), row("cuLaunchKernel", 6, 60.0),
                                row("cudaMemsetAsync", 4, 40.0), row("LinearAct", 10, 200.0),
                                row("nvjet", 20, 0.0, DeviceType.CUDA)])
        h = kernels.host_ops(fake_torch(prof), prof, 2, top=3)
        self.assertEqual(h["launches_per_step"], 20.0, "kernel launches and the memset, not the CUDA rows")
        self.assertEqual(h["operators_per_step"], 20.0, "the aten rows, nested ones too")
        self.assertAlmostEqual(h["self_ms"], 0.55, msg="every CPU row's self time, per step")
        self.assertEqual([(t["name"], t["calls"]) for t in h["top"]],
                         [("aten::addmm", 10.0), ("cudaLaunchKernel", 15.0), ("LinearAct", 5.0)])
        self.assertAlmostEqual(h["top"][0]["ms"], 0.2)


class ProfileStepsTest(unittest.TestCase):
    def run_profile(self, prof, **kw):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            steps = []
            ok = kernels.profile_steps(fake_torch(prof), steps.append, path, 3, meta={"name": "hf-eager"}, **kw)
            with open(path) as f:
                return ok, json.load(f), steps

    def test_writes_the_summary(self):
        prof = FakeProfile([ev("nvjet", DeviceType.CUDA, 6000), ev("flash_fwd", DeviceType.CUDA, 3000)])
        ok, p, steps = self.run_profile(prof, step_ms=4.0, prepare=lambda i: ("batch", i))
        self.assertTrue(ok)
        self.assertEqual(steps, [("batch", 0), ("batch", 1), ("batch", 2)])
        self.assertEqual(prof.activities, ["cpu", "cuda"])
        self.assertEqual((p["name"], p["device"], p["steps"]), ("hf-eager", "cuda", 3))
        self.assertAlmostEqual(p["kernel_ms"], 3.0)
        self.assertAlmostEqual(p["profiled_step_ms"], 9.0, msg="mean of the CUDA-event times")
        self.assertAlmostEqual(p["idle_ms"], 1.0)
        self.assertEqual(p["host"]["launches_per_step"], 0.0, "the host's side is recorded on CUDA")

    def test_step_time_from_the_step(self):
        prof = FakeProfile([ev("nvjet", DeviceType.CUDA, 3000)])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            self.assertTrue(kernels.profile_steps(fake_torch(prof), lambda i: 2.0 * (i + 1), path, 3,
                                                  timed_by_step=True))
            with open(path) as f:
                self.assertAlmostEqual(json.load(f)["profiled_step_ms"], 4.0)

    def test_failure_writes_the_error_and_does_not_raise(self):
        ok, p, _ = self.run_profile(FakeProfile([], fail=RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")))
        self.assertFalse(ok)
        self.assertEqual(p["name"], "hf-eager")
        self.assertIn("CUPTI_ERROR_NOT_INITIALIZED", p["error"])

    def test_no_kernels_is_an_error(self):
        ok, p, _ = self.run_profile(FakeProfile([ev("aten::mm", DeviceType.CPU, 5)]))
        self.assertFalse(ok)
        self.assertIn("no CUDA kernels", p["error"])


class MarkdownTest(unittest.TestCase):
    def test_side_by_side(self):
        eng = dict(kernels.summarize(EVENTS, 2, step_ms=11.0), name="engine-bf16",
                   memsets_after=[{"after": "flash_bwd", "per_step": 12.0}, {"after": "nvjet", "per_step": 1.5}],
                   host={"launches_per_step": 1312.0, "operators_per_step": 2600.4, "self_ms": 25.5,
                         "top": [{"name": "aten::empty", "calls": 400.0, "ms": 2.25}]})
        ref = dict(kernels.summarize(EVENTS[:3] + [("cunn_SoftMaxForward|x", 8000.0, 2)], 2, step_ms=20.0),
                   name="hf-eager")
        with tempfile.TemporaryDirectory() as d:
            e, r = os.path.join(d, "e.json"), os.path.join(d, "r.json")
            for path, p in ((e, eng), (r, ref)):
                with open(path, "w") as f:
                    json.dump(p, f)
            md = kernels.markdown([("bert-large 32x512", e, r), ("gpt-124m 16x1024", e, os.path.join(d, "none"))])
        lines = md.splitlines()
        self.assertEqual(lines[0], "## Kernel profiles")
        self.assertIn("### bert-large 32x512: engine-bf16 vs hf-eager", lines)
        self.assertIn("| CUDA kernel time ms | 10.00 | 10.00 |", lines)
        self.assertIn("| idle gap ms (measured step − kernels) | 1.00 (9.1%) | 10.00 (50.0%) |", lines)
        self.assertIn("| gemm/matmul | 6.00 | 60.0% | 6.00 | 60.0% | +0.00 |", lines)
        self.assertIn("| softmax/cross-entropy | – | – | 4.00 | 40.0% | -4.00 |", lines)
        self.assertIn("| 4.00 | 40.0% | 1 | softmax/cross-entropy | `cunn_SoftMaxForward\\|x` |", lines,
                      "a pipe in a name does not break the table")
        self.assertIn("Top 5 of engine-bf16 (of 5 distinct):", lines)
        self.assertIn("Memsets of engine-bf16 per step, by the kernel before them: 12 after `flash_bwd`; "
                      "1.5 after `nvjet`", lines)
        self.assertFalse(any(ln.startswith("Memsets of hf-eager") for ln in lines), "none recorded: no line")
        self.assertIn("| host: launches per step | 1312 | – |", lines)
        self.assertIn("| host: operators per step | 2600 | – |", lines)
        self.assertIn("| host: self CPU ms (profiled) | 25.50 | – |", lines)
        self.assertIn("Host operators of engine-bf16 by self CPU time per step: `aten::empty` 2.25 ms in 400", lines)
        self.assertIn("### gpt-124m 16x1024: engine-bf16 vs reference", lines)
        self.assertTrue(any(ln.startswith("- reference: no profile") for ln in lines))

    def test_cli_wants_triples(self):
        with self.assertRaises(SystemExit):
            kernels.main(["group", "e.json"])


@functools.lru_cache(maxsize=None)
def python_with_torch():
    """A python that has torch: this one, or Debian's (python3-torch). It finds
    the package without importing it (an import of torch is seconds, and every
    test that uses this python imports it again in its own process; a torch
    that is there but broken fails those tests instead of skipping them)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", probe], capture_output=True).returncode == 0:
            return py
    return None


class RealProfilerTest(unittest.TestCase):
    """The real torch.profiler (Debian's torch on the CPU): cs_bench.py
    --profile on the CPU engine, whose own operators show in the profile (one
    libtorch for Python's torch and the engine), and a reference-style step."""

    def setUp(self):
        self.lib = os.environ.get("CASESTUDY_ENGINE_LIB") or os.path.join(ROOT, "build/engine/libcasestudy_engine.so")
        self.py = python_with_torch()
        missing = [w for w, ok in (("an engine library at " + self.lib, os.path.exists(self.lib)),
                                   ("a python with torch (apt-get install python3-torch)", self.py)) if not ok]
        if missing:
            msg = "needs " + " and ".join(missing)
            if os.environ.get("CI") == "true":
                self.fail(msg + " (CI=true: scripts/install-deps.sh and make engine provide them)")
            self.skipTest(msg)

    def bench(self, *extra):
        cfg = {"family": "gpt", "preset": "tiny", "micro_batch": 2, "seq_len": 32, "device": "cpu", "threads": 1}
        return subprocess.run([self.py, os.path.join(ROOT, "engine/native/tools/cs_bench.py"), "--lib", self.lib,
                               "--name", "engine-cpu", "--config", json.dumps(cfg), "--warmup", "1", "--steps", "2",
                               *extra], capture_output=True, text=True, timeout=120)

    def test_profile_has_the_engines_operators(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "engine.json")
            r = self.bench("--profile", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            line = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual((line["name"], line["model"]), ("engine-cpu", "gpt-tiny"))
            with open(path) as f:
                p = json.load(f)
        self.assertNotIn("error", p)
        self.assertEqual((p["name"], p["device"], p["steps"]), ("engine-cpu", "cpu", 3))
        names = {k["name"] for k in p["top"]}
        self.assertTrue(names & {"aten::mm", "aten::addmm", "aten::bmm"}, names)
        cats = {c["category"]: c["ms"] for c in p["categories"]}
        self.assertGreater(cats.get("gemm/matmul", 0), 0)
        self.assertGreater(p["kernel_ms"], 0)
        self.assertLessEqual(p["kernel_ms"], p["profiled_step_ms"] * 1.05, "operators inside the step")

    def test_first_step_ops_of_a_launch(self):
        """cs_bench.py --launch --first-step-ops: the engine's operators of its
        first step by self CPU time, and the launch line marked profiled."""
        cfg = {"family": "gpt", "preset": "tiny", "micro_batch": 2, "seq_len": 32, "device": "cpu", "threads": 1}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "first.txt")
            r = subprocess.run([self.py, os.path.join(ROOT, "engine/native/tools/cs_bench.py"), "--lib", self.lib,
                                "--name", "engine-cpu", "--config", json.dumps(cfg), "--launch",
                                "--first-step-ops", path], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            line = json.loads(r.stdout.strip().splitlines()[-1])
            with open(path) as f:
                text = f.read()
        self.assertTrue(line["launch"]["profiled"])
        self.assertGreater(line["launch"]["first_step_ms"], 0)
        head, cols, *rows = text.splitlines()
        self.assertTrue(head.startswith("engine-cpu: first step"), head)
        self.assertIn("operator", cols)
        self.assertTrue(rows and any(op in text for op in ("aten::mm", "aten::addmm", "aten::bmm")), text)
        selfs = [float(r.split()[0]) for r in rows]
        self.assertEqual(selfs, sorted(selfs, reverse=True), "by self CPU time")

    def test_reference_style_step_under_the_real_profiler(self):
        """profile_steps as the references call it (prepare, the step timed
        here), with the real torch.profiler on a small torch model."""
        prog = """
import json, sys, torch
sys.path.insert(0, sys.argv[2])
import kernels
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
opt = torch.optim.AdamW(model.parameters(), foreach=True)
def step(batch):
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
prepare = lambda i: (torch.randn(32, 64), torch.randint(0, 10, (32,)))
ok = kernels.profile_steps(torch, step, sys.argv[1], 3, step_ms=1.0, prepare=prepare, meta={"name": "hf-eager"})
sys.exit(0 if ok else 1)
"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ref.json")
            r = subprocess.run([self.py, "-c", prog, path, os.path.dirname(os.path.abspath(__file__))],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                p = json.load(f)
        cats = {c["category"]: c["ms"] for c in p["categories"]}
        self.assertEqual((p["name"], p["steps"], p["idle_of"]), ("hf-eager", 3, "profiled"))
        self.assertGreater(cats.get("gemm/matmul", 0), 0, cats)
        self.assertGreater(cats.get("softmax/cross-entropy", 0), 0, cats)
        self.assertGreater(p["profiled_step_ms"], 0)

    def test_unwritable_profile_keeps_the_benchmark_line(self):
        r = self.bench("--profile", "/nonexistent-dir/p.json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout.strip().splitlines()[-1])["name"], "engine-cpu")
        self.assertIn("cannot write the profile", r.stderr)


if __name__ == "__main__":
    unittest.main()
