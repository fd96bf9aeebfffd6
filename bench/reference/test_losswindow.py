"""Tests of engine/native/tools/losswindow.py (the fp8 verdicts' window and
spikes) on made-up curves (not results)."""
import os
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "engine", "native", "tools"))
import losswindow  # noqa: E402

PLATEAU = [10.98, 10.2, 9.6, 9.2, 8.9, 8.7, 8.55, 8.45, 8.4] + [8.37 + 0.01 * (i % 3) for i in range(31)]


class Window(unittest.TestCase):
    def test_a_spike_of_five_steps_in_the_window_is_not_divergence(self):
        # The longest measured spike: steps 25-29 (2026-12-07); here the last 5 of 40.
        run = PLATEAU[:35] + [18.7, 15.0, 12.0, 9.5, 8.9]
        kind, text = losswindow.judge(run, PLATEAU)
        self.assertEqual(kind, "tracks", text)
        self.assertEqual([(a, b) for a, b, _, _ in losswindow.spikes(run)], [(36, 40)])
        # Seven high steps out of 12 move the median: the run is judged up.
        run = PLATEAU[:33] + [18.7] * 7
        self.assertEqual(losswindow.judge(run, PLATEAU)[0], "diverged")

    def test_a_non_finite_loss_is_divergence(self):
        # NaN compares false with everything: without the check it read "behind".
        run = PLATEAU[:20] + [float("nan")] + PLATEAU[21:]
        kind, text = losswindow.judge(run, PLATEAU)
        self.assertEqual(kind, "diverged", text)
        self.assertIn("step 21", text)

    def test_spike_episodes(self):
        run = list(PLATEAU)
        run[24], run[25], run[30] = 18.0, 12.0, 8.8
        eps = losswindow.spikes(run)
        self.assertEqual([(a, b, at) for a, b, _, at in eps], [(25, 26, 25), (31, 31, 31)])
        self.assertAlmostEqual(eps[0][2], 18.0 / 8.38 - 1, places=2)
        text = losswindow.spike_text(eps)
        self.assertTrue(text.startswith("2: steps 25-26 (+114.8% at 25), step 31 (+4.9% at 31)"), text)
        self.assertEqual(losswindow.spike_text([]), "none")
        self.assertEqual(losswindow.spikes(PLATEAU), [])  # a falling curve and plateau noise of 0.2%

    def test_behind_rising_and_short_runs(self):
        ref = [8.4] * 20 + [8.4 - 0.05 * i for i in range(1, 21)]
        late = [8.4] * 30 + [8.4 - 0.05 * i for i in range(1, 11)]
        self.assertEqual(losswindow.judge(late, ref)[0], "behind")
        self.assertEqual(losswindow.judge(ref, late)[0], "tracks")  # below: fine
        up = PLATEAU[:20] + [8.4 + 0.4 * i for i in range(20)]
        kind, text = losswindow.judge(up, PLATEAU)
        self.assertEqual(kind, "diverged")
        self.assertIn("rising", text)
        # Fewer steps than the window: the median of all of them, never "rising".
        self.assertEqual(losswindow.rising([9.0, 10.0, 11.0])[0], False)
        self.assertEqual(losswindow.judge([9.0, 10.0, 11.0], [9.0, 8.0, 7.0])[0], "behind")
        self.assertEqual(losswindow.judge(PLATEAU[:5], PLATEAU[:5])[0], "tracks")


if __name__ == "__main__":
    unittest.main()
