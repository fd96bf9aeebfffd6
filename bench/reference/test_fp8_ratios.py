"""Tests of bench/reference/fp8_ratios.py: fp8/bf16 step-time ratios and the
loss verdict of one benchmark group, on made-up bench.jsonl lines."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_ratios  # noqa: E402


def run(name, ms, loss, group="g"):
    return {"group": group, "name": name, "step_ms": {"median": ms, "p10": ms, "p90": ms},
            "loss_first": 10.98, "loss_last": loss}


class Verdict(unittest.TestCase):
    def test_ratios_and_pass(self):
        rows = {r["name"]: r for r in [run("engine-bf16-graphs", 30.0, 8.364),
                                       run("engine-fp8-tensor-graphs", 24.0, 8.40),
                                       run("engine-fp8-row-graphs", 33.0, 8.36)]}
        line, passed = fp8_ratios.verdict(rows)
        self.assertTrue(passed)
        self.assertIn("tensor/bf16 0.80x (24.0 / 30.0 ms), loss 8.400", line)
        self.assertIn("row/bf16 1.10x", line)

    def test_divergence_fails(self):
        # 2026-12-06, GPT-2 124M per tensor: 10.98 -> 16.25 where bf16 reached 8.364.
        rows = {r["name"]: r for r in [run("engine-bf16-graphs", 30.3, 8.364),
                                       run("engine-fp8-tensor-graphs", 56.4, 16.25),
                                       run("engine-fp8-row-graphs", 77.8, 8.364)]}
        line, passed = fp8_ratios.verdict(rows)
        self.assertFalse(passed)
        self.assertIn("tensor/bf16 1.86x", line)
        self.assertIn("ABOVE bf16's 8.364", line)

    def test_nan_loss_fails(self):
        rows = {r["name"]: r for r in [run("engine-bf16-graphs", 30.0, 8.0),
                                       run("engine-fp8-tensor-graphs", 20.0, float("nan"))]}
        self.assertFalse(fp8_ratios.verdict(rows)[1])

    def test_missing_results_fail(self):
        self.assertFalse(fp8_ratios.verdict({})[1])
        only_bf16 = {"engine-bf16-graphs": run("engine-bf16-graphs", 30.0, 8.0)}
        self.assertFalse(fp8_ratios.verdict(only_bf16)[1])
        failed = dict(only_bf16, **{"engine-fp8-tensor-graphs": {"group": "g", "name": "engine-fp8-tensor-graphs",
                                                                 "status": "timeout", "reason": "x"}})
        line, passed = fp8_ratios.verdict(failed)
        self.assertFalse(passed)
        self.assertIn("tensor no result", line)
        # One fp8 run fine, another crashed: the group fails all the same.
        one_crashed = dict(failed, **{"engine-fp8-row-graphs": run("engine-fp8-row-graphs", 40.0, 8.0)})
        line, passed = fp8_ratios.verdict(one_crashed)
        self.assertFalse(passed)
        self.assertIn("tensor no result", line)

    def test_skipped_for_time_is_no_verdict(self):
        skip = {"group": "g", "status": "skipped", "reason": "needs ~15 s, 0 s left"}
        rows = {"engine-bf16-graphs": run("engine-bf16-graphs", 30.0, 8.0),
                "engine-fp8-tensor-graphs": dict(skip, name="engine-fp8-tensor-graphs")}
        line, passed = fp8_ratios.verdict(rows)
        self.assertIsNone(passed)
        self.assertIn("skipped", line)
        self.assertIsNone(fp8_ratios.verdict({"engine-bf16-graphs": dict(skip, name="engine-bf16-graphs")})[1])

    def test_command_line_reads_its_group(self):
        lines = [run("engine-bf16-graphs", 30.0, 8.0, "a"), run("engine-fp8-tensor-graphs", 15.0, 8.0, "a"),
                 run("engine-bf16-graphs", 60.0, 8.0, "b"), run("engine-fp8-tensor-graphs", 90.0, 20.0, "b")]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("not json\n")
            for r in lines:
                f.write(json.dumps(r) + "\n")
        try:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fp8_ratios.py")
            a = subprocess.run([sys.executable, script, f.name, "a"], capture_output=True, text=True)
            self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
            self.assertIn("tensor/bf16 0.50x", a.stdout)
            b = subprocess.run([sys.executable, script, f.name, "b"], capture_output=True, text=True)
            self.assertEqual(b.returncode, 1)
            self.assertIn("tensor/bf16 1.50x", b.stdout)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
