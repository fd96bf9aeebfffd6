"""Tests of bench/reference/bn_fusion_model.py: which batch-norm passes the cuDNN
fusions remove, the bytes-share arithmetic, and the command's refusal of bad input."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bn_fusion_model  # noqa: E402
import bn_roofline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Mapping(unittest.TestCase):
    def test_roles(self):
        self.assertEqual(bn_fusion_model.role("stem"), "stem")
        self.assertEqual(bn_fusion_model.role("layer2.0.down"), "down")
        self.assertEqual(bn_fusion_model.role("layer3.4.bn2"), "bn2")
        self.assertEqual(bn_fusion_model.role("layer4.2.bn3"), "bn3")

    def test_what_each_role_loses(self):
        # One batch norm of each role, 1000 rows of 64 channels; measured 1 ms a family.
        layers = [("stem", 64, 1000, False, True, False), ("layer1.0.bn1", 64, 1000, False, True, False),
                  ("layer1.0.bn3", 64, 1000, True, True, True), ("layer1.0.down", 64, 1000, False, False, False)]
        fam = bn_roofline.families(layers, blocks=10)
        rows = bn_fusion_model.removed(layers, 10, 1.0, {k: 1.0 for k in fam})
        # Statistics: all but the stem's three of four equal launches.
        self.assertAlmostEqual(rows["bn_fwd_stats_kernel"][2], 0.75)
        self.assertEqual(rows["bn_fwd_stats_kernel"][3], 3)
        # Applies: bn1's (the stem's stays, same family) and the downsample's; bn3's stays.
        self.assertAlmostEqual(rows["bn_fwd_apply_kernel<0,1>"][2], 0.5)
        self.assertAlmostEqual(rows["bn_fwd_apply_kernel<0,0>"][2], 1.0)
        self.assertEqual(rows["bn_fwd_apply_kernel<1,1>"][2], 0.0)
        # Backward: bn1's reduction goes, less the epilogue's read of x (2E at 1 TB/s) at the low end.
        low, high = rows["bn_bwd_reduce_kernel<1,0>"][1:3]
        self.assertAlmostEqual(high, 0.5)
        self.assertAlmostEqual(low, max(0.0, 0.5 - 2 * 64000 / 1e12 * 1e3))
        self.assertEqual(rows["bn_bwd_reduce_kernel<1,1>"][2], 0.0)
        self.assertEqual(rows["bn_bwd_apply_kernel<0>"][2], 0.0)
        self.assertEqual(rows["bn_fwd_finalize_kernel"][2], 0.0)

    def test_family_not_in_profile_is_left_out(self):
        layers = [("layer1.0.bn1", 64, 1000, False, True, False)]
        rows = bn_fusion_model.removed(layers, 10, 1.0, {"bn_fwd_stats_kernel": 2.0})
        self.assertEqual(list(rows), ["bn_fwd_stats_kernel"])
        self.assertAlmostEqual(rows["bn_fwd_stats_kernel"][2], 2.0)


class Command(unittest.TestCase):
    def run_cmd(self, prof, *extra):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(prof, f)
        try:
            return subprocess.run([sys.executable, os.path.join(HERE, "bn_fusion_model.py"), f.name, *extra],
                                  capture_output=True, text=True)
        finally:
            os.unlink(f.name)

    def test_not_resnet_refused(self):
        r = self.run_cmd({"model": "gpt", "micro_batch": 8, "top": []})
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a resnet50 profile", r.stderr)

    def test_table_and_break_even(self):
        top = [{"name": "void cs::cuda::(anonymous namespace)::bn_fwd_stats_kernel<__nv_bfloat16>(x)", "ms": 3.0,
                "calls": 53}]
        r = self.run_cmd({"model": "resnet50", "micro_batch": 384, "name": "t", "top": top}, "--step-ms", "56.7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("PREDICTION", r.stdout)
        self.assertIn("`bn_fwd_stats_kernel` | 3.000 | 52 |", r.stdout)
        self.assertIn("7,200 img/s needs 3.37 ms off the step", r.stdout)


if __name__ == "__main__":
    unittest.main()
