"""Tests of engine/native/tools/host_probe.py with a stand-in for torch (no
GPU here): the launches it times, the drains around each round, the per-launch
arithmetic and its output."""
import contextlib
import io
import json
import os
import sys
import types
import unittest
from unittest import mock

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "engine", "native", "tools"))
import host_probe  # noqa: E402


class FakeTensor:
    def __init__(self, log):
        self.log = log

    def add_(self, v):
        self.log.append("add")
        return self


def fake_torch(available=True):
    log = []
    t = types.ModuleType("torch")
    t.__version__ = "0.0-test"
    t.cuda = types.SimpleNamespace(
        is_available=lambda: available,
        synchronize=lambda: log.append("sync"),
    )
    t.zeros = lambda n, device=None: FakeTensor(log)
    return t, log


class ProbeTest(unittest.TestCase):
    def test_counts_rounds_and_per_launch_time(self):
        torch, log = fake_torch()
        # perf_counter: each round starts at 10 s a round apart and takes 0.002 s per launch
        ticks = []
        for r in range(3):
            ticks += [10.0 * r, 10.0 * r + 0.002 * 50 * (r + 1)]
        with mock.patch.dict(sys.modules, {"torch": torch}), mock.patch.object(
                host_probe.time, "perf_counter", side_effect=ticks):
            r = host_probe.probe(50, 3)
        self.assertEqual(log.count("add"), 200 + 3 * 50)  # warm-up, then the rounds
        # drained after the warm-up, before each round and at the end
        self.assertEqual(log.count("sync"), 1 + 3 + 1)
        u = r["launch_us"]
        self.assertAlmostEqual(u["min"], 2000.0)
        self.assertAlmostEqual(u["median"], 4000.0)
        self.assertAlmostEqual(u["max"], 6000.0)
        self.assertEqual((r["launches"], r["rounds"], r["torch"]), (50, 3, "0.0-test"))

    def test_no_gpu_is_an_error(self):
        torch, _ = fake_torch(available=False)
        with mock.patch.dict(sys.modules, {"torch": torch}):
            with self.assertRaises(SystemExit) as e:
                host_probe.probe(10, 1)
        self.assertIn("no CUDA device", str(e.exception))

    def test_main_prints_json_and_a_line(self):
        torch, _ = fake_torch()
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.dict(sys.modules, {"torch": torch}), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            host_probe.main(["--launches", "5", "--rounds", "2"])
        r = json.loads(out.getvalue())
        self.assertEqual(r["launches"], 5)
        self.assertIn("µs per eager launch of a tiny CUDA op", err.getvalue())

    def test_bad_arguments(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            host_probe.main(["--rounds", "0"])
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
