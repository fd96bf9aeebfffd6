"""Tests of profile_diff.py on synthetic profiles."""
import io
import json
import os
import tarfile
import tempfile
import unittest
from contextlib import redirect_stdout

import profile_diff


def prof(step, cats, top):
    return {"step_ms": step, "kernel_ms": sum(cats.values()),
            "categories": [{"category": c, "ms": ms} for c, ms in cats.items()],
            "top": [{"name": n, "category": "x", "calls": 1, "ms": ms} for n, ms in top.items()]}


A = prof(57.4, {"batchnorm": 26.2, "convolution": 20.3}, {"fused_conv": 0.66, "bn_stats": 0.64})
B = prof(59.3, {"batchnorm": 29.0, "convolution": 19.4}, {"plain_conv": 2.88, "bn_stats": 3.19})


class DiffTest(unittest.TestCase):
    def test_largest_first_with_zero_for_missing(self):
        lines = profile_diff.diff(A, B, ("fused", "unfused"))
        self.assertEqual(lines[0], "step_ms fused 57.40 unfused 59.30 kernel_ms 46.50 48.40")
        cat = lines[1:lines.index(next(x for x in lines if x.startswith("by name")))]
        self.assertTrue(cat[1].startswith("  -2.800 ms  fused  26.200  unfused  29.000  batchnorm"), cat)
        self.assertTrue(cat[2].startswith("  +0.900 ms"), cat)
        names = lines[lines.index(next(x for x in lines if x.startswith("by name"))) + 1:]
        self.assertEqual(names[0], "  -2.880 ms  fused   0.000  unfused   2.880  plain_conv")
        self.assertEqual(names[1], "  -2.550 ms  fused   0.640  unfused   3.190  bn_stats")
        self.assertEqual(names[2], "  +0.660 ms  fused   0.660  unfused   0.000  fused_conv")

    def test_long_names_alike_add_up(self):
        long = "k" * 95
        a = prof(1.0, {"x": 3.0}, {long + "1": 1.0, long + "2": 2.0})
        b = prof(1.0, {"x": 3.0}, {long + "2": 2.0, long + "1": 1.0})
        names = profile_diff.diff(a, b)[-1:]
        self.assertEqual(names[0], "  +0.000 ms  a   3.000  b   3.000  " + "k" * 90)

    def test_from_tgz_and_missing(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "profiles.tgz")
            with tarfile.open(path, "w:gz") as t:
                for name, p in (("profiles/r-fused.json", A), ("profiles/r-plain.json", B)):
                    data = json.dumps(p).encode()
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
            out = io.StringIO()
            with redirect_stdout(out):
                rc = profile_diff.main(["--tgz", path, "r-fused", "r-plain", "--labels", "f,u"])
            self.assertEqual(rc, 0)
            self.assertIn("step_ms f 57.40 u 59.30", out.getvalue())
            out = io.StringIO()
            with redirect_stdout(out):
                rc = profile_diff.main(["--tgz", path, "r-fused", "r-none"])
            self.assertEqual(rc, 1)
            self.assertIn("profiles missing: ['r-none']", out.getvalue())

    def test_files_missing_and_labels(self):
        with tempfile.TemporaryDirectory() as d:
            a = os.path.join(d, "a.json")
            with open(a, "w") as f:
                json.dump(A, f)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = profile_diff.main([a, os.path.join(d, "none.json")])
            self.assertEqual(rc, 1)
            self.assertIn("a profile failed: no profile", out.getvalue())
            with self.assertRaises(SystemExit):
                profile_diff.main([a, a, "--labels", "x"])


if __name__ == "__main__":
    unittest.main()
