"""Tests of common.py with a stand-in for torch's CUDA events (no GPU needed),
and of table.py's summary:
python3 -m unittest discover -s bench/reference (make test runs it)."""

import json
import os
import tempfile
import types
import unittest

import common
import table


def fake_event(elapsed):
    """A stand-in for torch.cuda.Event whose elapsed_time() returns elapsed()."""

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return elapsed()

    return Event


def fake_torch(durations):
    """A torch whose CUDA events report durations[k] for the k-th timed step."""
    state = {"step": 0, "resets": []}
    Event = fake_event(lambda: durations[state["step"] - 1])

    def reset_peak_memory_stats():
        state["resets"].append(state["step"])

    cuda = types.SimpleNamespace(Event=Event, reset_peak_memory_stats=reset_peak_memory_stats)
    return types.SimpleNamespace(cuda=cuda), state


class Loss:
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


class TimeStepsTest(unittest.TestCase):
    def test_warmup_discarded_and_losses_kept(self):
        torch, state = fake_torch([100.0, 90.0, 3.0, 4.0, 5.0])

        def step(i):
            state["step"] += 1
            return Loss(float(i))

        times, losses = common.time_steps(torch, step, warmup=2, steps=3)
        self.assertEqual(times, [3.0, 4.0, 5.0])
        self.assertEqual(losses, [0.0, 1.0, 2.0, 3.0, 4.0])
        self.assertEqual(state["resets"], [2], "peak memory restarts once, after the warm-up")

    def test_prepare_runs_before_the_step(self):
        torch, state = fake_torch([1.0, 1.0])
        seen = []

        def step(x):
            state["step"] += 1
            seen.append(x)
            return Loss(0.0)

        common.time_steps(torch, step, 0, 2, prepare=lambda i: ("batch", i))
        self.assertEqual(seen, [("batch", 0), ("batch", 1)])


class SummaryTest(unittest.TestCase):
    def test_pct_interpolates(self):
        self.assertEqual(common.pct([4, 1, 3, 2, 5], 0.5), 3)
        self.assertAlmostEqual(common.pct([0, 10], 0.1), 1.0)
        self.assertEqual(common.pct([7], 0.9), 7)

    def test_step_ms(self):
        s = common.step_ms([1.0, 2.0, 3.0, 4.0, 100.0])
        self.assertEqual(s["median"], 3.0)
        self.assertLess(s["p10"], s["median"])
        self.assertGreater(s["p90"], s["median"])

    def test_peaks(self):
        self.assertEqual(common.peak_tflops("NVIDIA H200"), 989.4)
        self.assertEqual(common.peak_tflops("NVIDIA H100 PCIe"), 756.4, "the specific name wins")
        self.assertEqual(common.peak_tflops("NVIDIA H200", precision="fp32"), 66.9)
        self.assertEqual(common.peak_tflops("NVIDIA H200", 500.0), 500.0)
        self.assertEqual(common.peak_tflops("Some CPU"), 0.0)


class TableTest(unittest.TestCase):
    def row(self, group, name, sps):
        return {"group": group, "name": name, "precision": "bf16", "samples_per_s": sps, "mfu": 0.1,
                "step_ms": {"median": 1.0, "p10": 1.0, "p90": 1.0}, "tokens_per_s": 0, "tflops": 1.0,
                "mem_peak_bytes": 0, "loss_first": 1.0, "loss_last": 0.5}

    def test_profile_groups_stay_out_of_the_summary(self):
        rows = [self.row("gpt-124m 16x1024", "engine-bf16", 200.0), self.row("gpt-124m 16x1024", "hf-eager", 100.0),
                self.row("profile gpt-124m 16x1024", "engine-bf16", 150.0),
                self.row("profile gpt-124m 16x1024", "hf-eager", 100.0)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bench.jsonl")
            with open(path, "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
            groups = table.load(path)
        summary = table.summary(groups)
        self.assertEqual(len(summary), 3, summary)
        self.assertTrue(summary[2].startswith("| gpt-124m 16x1024 | engine-bf16 | 200 |"), summary[2])
        self.assertIn("| 2.00× (hf-eager) |", summary[2])
        self.assertIn("### profile gpt-124m 16x1024", table.detail("profile gpt-124m 16x1024",
                                                                  groups["profile gpt-124m 16x1024"]))

    def test_libraries_each_copy_with_its_runs(self):
        wheel, system = "/w/nvidia/cudnn/lib/libcudnn.so.9", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"
        a = dict(self.row("g", "engine-bf16", 1.0), libraries={"libcudnn.so.9": wheel}, cudnn_runtime="91900")
        b = dict(self.row("g", "engine-bf16-graphs", 1.0), libraries={"libcudnn.so.9": wheel}, cudnn_runtime="91900")
        c = dict(self.row("h", "engine-bf16", 1.0), libraries={"libcudnn.so.9": system}, cudnn_runtime="91300")
        lines = table.libraries({"g": [a, b, self.row("g", "fast-eager", 1.0)], "h": [c]})
        self.assertEqual(lines[2], "cuDNN loaded: 91300 (1 runs), 91900 (2 runs)")
        self.assertIn(f"- `libcudnn.so.9` {wheel} (2 runs)", lines)
        self.assertIn(f"- `libcudnn.so.9` {system} (1 runs)", lines)
        self.assertEqual(table.libraries({"g": [self.row("g", "engine-bf16", 1.0)]}), [])

    def test_against_the_best_reference_of_each_mode_in_any_of_their_precisions(self):
        g = "resnet50 256x224"
        rows = [self.row(g, "engine-bf16", 300.0), dict(self.row(g, "engine-fp16", 330.0), precision="fp16"),
                dict(self.row(g, "engine-fp32", 900.0), precision="fp32"),  # no reference in fp32
                self.row(g, "tv-eager", 100.0), self.row(g, "tv-compile", 200.0),
                dict(self.row(g, "tv-fp16-eager", 110.0), precision="fp16"),
                dict(self.row(g, "tv-fp16-compile", 150.0), precision="fp16"),
                {"group": g, "name": "nano-compile", "status": "failed", "reason": "x"}]
        refs = table.refs(rows)
        self.assertEqual(refs["eager"]["name"], "tv-fp16-eager")
        self.assertEqual(refs["compile"]["name"], "tv-compile")
        line = table.summary({g: rows})[2]
        self.assertTrue(line.startswith("| %s | engine-fp16 | 330 |" % g), line)
        self.assertIn("| 3.00× (tv-fp16-eager) |", line)
        self.assertIn("| 1.65× (tv-compile) |", line)

    def test_launches_against_the_fastest_reference_arm(self):
        g = "gpt-124m 16x1024 (launches)"

        def run(name, ms):
            return dict(self.row(g, name, 1000.0 / ms), step_ms={"median": ms, "p10": ms, "p90": ms})
        rows = [run("engine-bf16-graphs-r1", 30.0), run("nano-r1-compile", 33.0),
                run("engine-bf16-graphs-r2", 31.0), run("nano-r2-compile", 34.1),
                run("engine-bf16-graphs-r3", 30.5), run("nano-r3-compile", 33.0),
                run("engine-bf16-graphs-noqkv-r1", 32.0),
                {"group": g, "name": "engine-bf16-graphs-noqkv-r2", "status": "timeout", "reason": "x"},
                run("engine-bf16", 29.0)]  # no round: not an arm
        lines = table.launches({g: rows, "other": [run("engine-bf16-r1", 1.0)]})  # no reference: none
        self.assertEqual(lines[0], "### " + g)
        self.assertIn("vs nano-compile: medians", lines[2])
        self.assertEqual(len(lines), 8, lines)  # title, blank, header, rule, three arms, blank
        self.assertEqual(lines[4], "| engine-bf16-graphs | 3 | 30.50 (30.00–31.00) | 1.082× | 1.082–1.100× (3) |")
        self.assertEqual(lines[5], "| nano-compile | 3 | 33.00 (33.00–34.10) | 1.000× | 1.000–1.000× (3) |")
        self.assertEqual(lines[6], "| engine-bf16-graphs-noqkv | 1 | 32.00 (32.00–32.00) | 1.031× | 1.031–1.031× (1) |")


class MeasuredFieldsTest(unittest.TestCase):
    def test_fields_from_the_median_step(self):
        cuda = types.SimpleNamespace(max_memory_allocated=lambda dev: 123 if dev == "cuda:0" else -1)
        torch = types.SimpleNamespace(cuda=cuda)
        f = common.measured_fields(torch, "cuda:0", [30.0, 10.0, 20.0], [9.0, 8.0, 7.0],
                                   micro_batch=4, flops_per_sample=2.5e12, tokens_per_sample=8, peak=1000.0)
        self.assertEqual(f["step_ms"], {"median": 20.0, "p10": 12.0, "p90": 28.0})
        self.assertAlmostEqual(f["samples_per_s"], 200.0)  # 4 samples in 20 ms
        self.assertAlmostEqual(f["tokens_per_s"], 1600.0)
        self.assertAlmostEqual(f["tflops"], 500.0)
        self.assertAlmostEqual(f["mfu"], 0.5)
        self.assertEqual(f["peak_tflops"], 1000.0)
        self.assertEqual(f["mem_peak_bytes"], 123)
        self.assertEqual((f["loss_first"], f["loss_last"]), (9.0, 7.0))
        self.assertEqual(common.measured_fields(torch, "cuda:0", [5.0], [1.0], 1, 1e12, 0, 0.0)["mfu"], 0.0,
                         "no MFU without a peak")

    def test_profiler_passes_the_median_and_the_line(self):
        import kernels
        calls = []
        saved = kernels.profile_steps
        kernels.profile_steps = lambda *a, **kw: calls.append((a, kw))
        try:
            res = {"name": "hf-eager", "model": "gpt-124m", "step_ms": {"median": 42.0}}
            step, prepare = object(), object()
            common.profiler("torch", step, res, prepare=prepare)("out.json")
        finally:
            kernels.profile_steps = saved
        (args, kw), = calls
        self.assertEqual(args, ("torch", step, "out.json", kernels.PROFILE_STEPS))
        self.assertEqual(kw["step_ms"], 42.0)
        self.assertIs(kw["prepare"], prepare)
        self.assertEqual(kw["meta"]["name"], "hf-eager")

if __name__ == "__main__":
    unittest.main()
