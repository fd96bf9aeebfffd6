"""Tests of engine/native/tools/losscurve.py: the kernels-vs-portable verdict
on made-up loss curves, and its command line on files as cs_bench.py --losses
writes them."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "engine", "native", "tools"))
import losscurve  # noqa: E402


def curve(n, start=10.0, end=4.0, wiggle=0.0, phase=0):
    """A falling loss curve with a deterministic wiggle of amplitude wiggle."""
    return [start + (end - start) * i / (n - 1) + wiggle * ((i * 7 + phase) % 5 - 2) / 2 for i in range(n)]


class VerdictTest(unittest.TestCase):
    def test_within_the_floor(self):
        native = curve(200)
        ok, msg = losscurve.verdict(curve(200, wiggle=0.01), native, curve(200, wiggle=0.05, phase=1))
        self.assertTrue(ok, msg)
        self.assertIn("within bf16 noise", msg)

    def test_further_than_bf16_from_fp32(self):
        native = curve(200)
        ok, msg = losscurve.verdict(curve(200, end=4.2), native, curve(200, wiggle=0.01, phase=1))
        self.assertFalse(ok, msg)
        self.assertIn("NOT within bf16 noise", msg)

    def test_a_run_that_does_not_learn_fails(self):
        flat = [10.0] * 200
        ok, msg = losscurve.verdict(flat, flat, [10.01] * 200)
        self.assertFalse(ok, msg)
        self.assertIn("does not learn", msg)

    def test_too_few_steps(self):
        ok, msg = losscurve.verdict(curve(10), curve(10), curve(10))
        self.assertFalse(ok)
        self.assertIn("too few steps", msg)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, xs in (("k", curve(200, wiggle=0.01)), ("n", curve(200)), ("f", curve(200, wiggle=0.05))):
                paths.append(os.path.join(d, name + ".json"))
                with open(paths[-1], "w") as f:
                    json.dump({"name": name, "losses": xs}, f)
            script = os.path.join(ROOT, "engine", "native", "tools", "losscurve.py")
            r = subprocess.run([sys.executable, script] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("within bf16 noise", r.stdout.splitlines()[-1])
            with open(paths[0], "w") as f:
                f.write("not json")
            r = subprocess.run([sys.executable, script] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout)


if __name__ == "__main__":
    unittest.main()
