"""Tests of common.py with a stand-in for torch's CUDA events (no GPU needed):
python3 -m unittest discover -s bench/reference (make test runs it)."""

import types
import unittest

import common


def fake_torch(durations):
    """A torch whose CUDA events report durations[k] for the k-th timed step."""
    state = {"step": 0, "resets": []}

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return durations[state["step"] - 1]

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


if __name__ == "__main__":
    unittest.main()
