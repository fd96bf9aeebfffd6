"""Tests of engine/native/tools/losscurve.py: the kernels-vs-portable verdict
over seeds on made-up loss curves, and its command line on files as
cs_bench.py --losses writes them."""
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


def seeds(kernel_end, native_end, n=5, steps=200):
    """n seeds whose fp32 curve ends at 4 + a seed's shift; the bf16 arms end
    kernel_end / native_end away from it, with a seed-dependent wiggle."""
    out = []
    for s in range(n):
        shift = 0.1 * s
        f = curve(steps, end=4.0 + shift)
        k = curve(steps, end=4.0 + shift + kernel_end[s % len(kernel_end)], wiggle=0.02, phase=s)
        na = curve(steps, end=4.0 + shift + native_end[s % len(native_end)], wiggle=0.02, phase=s + 2)
        out.append((k, na, f))
    return out


class VerdictTest(unittest.TestCase):
    def test_as_close_to_fp32_as_native_passes(self):
        # the kernels sometimes nearer, sometimes further than native: no evidence of harm
        ok, msg = losscurve.verdict(seeds([0.3, -0.5, 0.4, 0.2, -0.6], [0.5, 0.3, -0.4, 0.6, 0.2]))
        self.assertTrue(ok, msg)
        self.assertIn("within bf16 noise: over 5 seeds", msg)

    def test_consistently_further_from_fp32_fails(self):
        ok, msg = losscurve.verdict(seeds([0.9, -1.0, 1.1, 0.95, -1.05], [0.3, -0.2, 0.25, -0.3, 0.2]))
        self.assertFalse(ok, msg)
        self.assertIn("NOT within bf16 noise", msg)

    def test_fp8_labels(self):
        # precision fp8's check: the same criterion, fp8 against bf16 (gpu-check.sh losscurve with LOSS_FP8=1)
        ok, msg = losscurve.verdict(seeds([0.3, -0.5, 0.4, 0.2, -0.6], [0.5, 0.3, -0.4, 0.6, 0.2]), "fp8", "bf16")
        self.assertTrue(ok, msg)
        self.assertIn("within bf16 noise", msg)
        self.assertIn("mean |fp8 - fp32|", msg)
        ok, msg = losscurve.verdict(seeds([0.9, -1.0, 1.1, 0.95, -1.05], [0.3, -0.2, 0.25, -0.3, 0.2]), "fp8", "bf16")
        self.assertFalse(ok, msg)
        self.assertIn("NOT within bf16 noise: fp8 moves the curve further from fp32 than bf16 does", msg)

    def test_one_seed_cannot_decide(self):
        ok, msg = losscurve.verdict(seeds([0.0], [0.5], n=1))
        self.assertFalse(ok)
        self.assertIn("needs at least 3", msg)

    def test_a_run_that_does_not_learn_fails(self):
        flat = [10.0] * 200
        ok, msg = losscurve.verdict([(flat, flat, [10.01] * 200)] * 3)
        self.assertFalse(ok, msg)
        self.assertIn("does not learn (seeds [1, 2, 3]", msg)

    def test_too_few_steps(self):
        ok, msg = losscurve.verdict(seeds([0.0], [0.0], steps=20))
        self.assertFalse(ok)
        self.assertIn("too few steps", msg)

    def test_t_quantiles(self):
        self.assertEqual(losscurve.t95(4), 2.132)
        self.assertEqual(losscurve.t95(11), 1.812, "between tabled values: the smaller df, the larger quantile")
        self.assertEqual(losscurve.t95(100), 1.645)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for s, (k, na, f) in enumerate(seeds([0.3, -0.5, 0.4], [0.5, 0.3, -0.4], n=3)):
                for arm, xs in (("kernels", k), ("native", na), ("fp32", f)):
                    paths.append(os.path.join(d, "%s-s%d.json" % (arm, s + 1)))
                    with open(paths[-1], "w") as fh:
                        json.dump({"name": "losscurve-%s-s%d" % (arm, s + 1), "losses": xs}, fh)
            script = os.path.join(ROOT, "engine", "native", "tools", "losscurve.py")
            r = subprocess.run([sys.executable, script] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("within bf16 noise", r.stdout.splitlines()[-1])
            self.assertIn("losscurve-kernels-s3", r.stdout)
            r = subprocess.run([sys.executable, script, "--labels", "fp8,bf16"] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("mean |fp8 - fp32|", r.stdout.splitlines()[-1])
            self.assertIn("fp8      bf16", r.stdout.splitlines()[0])
            r = subprocess.run([sys.executable, script, "--labels", "fp8"] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout)
            r = subprocess.run([sys.executable, script] + paths[:4], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, "files not in triples: " + r.stdout)
            with open(paths[0], "w") as fh:
                fh.write("not json")
            r = subprocess.run([sys.executable, script] + paths, capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout)


if __name__ == "__main__":
    unittest.main()
