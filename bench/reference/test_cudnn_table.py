"""Tests of engine/native/tools/cudnn_table.py: the table of gpu-check.sh's
cudnn stage from cs_bench.py lines."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "engine", "native", "tools"))
import cudnn_table  # noqa: E402


def line(order, precision, cudnn, first_ms, median, first=False):
    return {"name": "x", "precision": precision, "micro_batch": 256, "image_size": 224, "channels_last": True,
            "cudnn": cudnn, "first_step_ms": first_ms, "first_step_engine_ms": first_ms - 5,
            "step_ms": {"median": median, "p10": median - 0.1, "p90": median + 0.1},
            "order": order, "first_of_precision": first}


class TableTest(unittest.TestCase):
    def test_against_the_warm_default(self):
        rows = [line(1, "bf16", "benchmark, limit 10", 11000, 40.0, first=True),
                line(2, "bf16", "heuristics", 900, 44.0),
                line(3, "bf16", "benchmark, limit 10", 3500, 39.6),
                line(4, "fp16", "benchmark, limit 1", 1200, 39.0, first=True)]
        out = cudnn_table.table(rows)
        self.assertIn("ResNet-50 256 x 224 channels_last", out)
        lines = [x for x in out.splitlines() if x.startswith("| ")]
        self.assertEqual(len(lines), 1 + 4)  # header + rows
        self.assertIn("benchmark, limit 10 (cold) | 11000", lines[1])
        self.assertIn("0.990x", lines[1])  # 39.6 / 40.0: against the warm run, not the cold one
        self.assertIn("0.900x", lines[2])  # 39.6 / 44.0
        self.assertIn("1.000x", lines[3])
        self.assertTrue(lines[4].endswith("| - |"), lines[4])  # no warm default for fp16

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cudnn.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps(line(1, "bf16", "heuristics", 800, 41.0, first=True)) + "\n")
            out = subprocess.run([sys.executable, os.path.join(ROOT, "engine", "native", "tools", "cudnn_table.py"),
                                  path], capture_output=True, text=True, check=True).stdout
            self.assertIn("| 1 | bf16 | heuristics (cold) | 800 | 795 | 41.00 (40.90-41.10) | - |", out)
            self.assertEqual(cudnn_table.table([]).strip(), "## cuDNN autotuning\n\nno runs")


if __name__ == "__main__":
    unittest.main()
