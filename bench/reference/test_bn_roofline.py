"""Tests of bench/reference/bn_roofline.py: ResNet-50's batch norms, the kernel
families the profile names, the bytes each launch moves, and the table from a
made-up profile."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bn_roofline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class Layers(unittest.TestCase):
    def test_resnet50_batch_norms(self):
        layers = bn_roofline.bn_layers(256)
        self.assertEqual(len(layers), 53)
        # As the H200 profile of e0a292f counts the kernels: 16 outputs of
        # blocks (residual), 33 with a ReLU only, 4 downsamples.
        self.assertEqual(sum(1 for l in layers if l[3]), 16)
        self.assertEqual(sum(1 for l in layers if l[4] and not l[3]), 33)
        self.assertEqual(sum(1 for l in layers if not l[4]), 4)
        # Every block's output but the last feeds the next block twice.
        self.assertEqual(sum(1 for l in layers if l[5]), 15)
        self.assertEqual(layers[0], ("stem", 64, 256 * 112 * 112, False, True, False))
        self.assertEqual(layers[-1], ("layer4.2.bn3", 2048, 256 * 7 * 7, True, True, False))
        self.assertIn(("layer2.0.bn1", 128, 256 * 56 * 56, False, True, False), layers)

    def test_bytes_of_a_launch(self):
        fam = bn_roofline.families([("x", 64, 1000, True, True, True)], blocks=10)
        e = 64000
        self.assertEqual(fam["bn_fwd_stats_kernel"]["bytes"], 2 * e + 10 * 3 * 64 * 4)
        self.assertEqual(fam["bn_fwd_apply_kernel<1,1>"]["bytes"], 6 * e + e / 8)
        # dy, dy2, x, the mask read; dres written; the partials.
        self.assertEqual(fam["bn_bwd_reduce_kernel<1,1>"]["bytes"], 8 * e + e / 8 + 10 * 2 * 64 * 4)
        # With a second gradient the apply reads the masked sum, not the mask.
        self.assertEqual(fam["bn_bwd_apply_kernel<0>"]["bytes"], 6 * e)


class Names(unittest.TestCase):
    def test_family_of(self):
        f = bn_roofline.family_of
        self.assertEqual(f("void cs::cuda::(anonymous namespace)::bn_bwd_reduce_kernel<__nv_bfloat16, true, false>(__nv_"), "bn_bwd_reduce_kernel<1,0>")
        self.assertEqual(f("void cs::cuda::(anonymous namespace)::bn_bwd_reduce_kernel<__nv_bfloat16, true, true, true>(x"), "bn_bwd_reduce_kernel<1,1>")
        self.assertEqual(f("void cs::cuda::(anonymous namespace)::bn_fwd_apply_kernel<__nv_bfloat16, false, true, true>(__"), "bn_fwd_apply_kernel<0,1>")
        self.assertEqual(f("void cs::cuda::(anonymous namespace)::bn_bwd_apply_kernel<__half, true, false>(__half"), "bn_bwd_apply_kernel<1>")
        self.assertEqual(f("void cs::cuda::(anonymous namespace)::bn_fwd_stats_kernel<__nv_bfloat16>(__nv_bfloat16 const*"), "bn_fwd_stats_kernel")
        self.assertEqual(f("cs::cuda::(anonymous namespace)::bn_fwd_finalize_kernel(float const*, long"), "bn_fwd_finalize_kernel")
        self.assertIsNone(f("sm90_xmma_fprop_implicit_gemm_bf16bf16"))


class Table(unittest.TestCase):
    def test_table_from_a_profile(self):
        n = 2
        bytes_ = bn_roofline.families(bn_roofline.bn_layers(n), 132 * 4)["bn_fwd_stats_kernel"]["bytes"]
        ms = bytes_ / 2.4e12 * 1e3  # at half of a 4.8 TB/s roofline
        prof = {"model": "resnet50", "name": "engine-bf16", "micro_batch": n,
                "top": [{"name": "void cs::cuda::(anonymous namespace)::bn_fwd_stats_kernel<__nv_bfloat16>(x)",
                         "calls": 53.0, "ms": ms}]}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "p.json")
            with open(p, "w") as f:
                json.dump(prof, f)
            out = subprocess.run([sys.executable, os.path.join(HERE, "bn_roofline.py"), p],
                                 capture_output=True, text=True, check=True).stdout
            self.assertIn("| `bn_fwd_stats_kernel` | 53 (53) |", out)
            self.assertIn("| 2.40 | 50% |", out)
            self.assertIn("not in the profile's top list", out)
            bad = subprocess.run([sys.executable, os.path.join(HERE, "bn_roofline.py"), os.path.join(d, "none.json")],
                                 capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("none.json", bad.stderr)


if __name__ == "__main__":
    unittest.main()
