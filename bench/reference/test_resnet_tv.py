"""resnet_tv.py --pad-stem's stem (pad_stem): the same outputs and weight
gradients as torchvision's 3-channel convolution, on the CPU with Debian's
torch (a python with torch, as test_kernels.py finds it)."""
import os
import subprocess
import unittest

from test_kernels import python_with_torch

HERE = os.path.dirname(os.path.abspath(__file__))

PROG = """
import sys, types, torch
sys.path.insert(0, sys.argv[1])
from resnet_tv import pad_stem
torch.manual_seed(0)
conv = torch.nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False)
model = types.SimpleNamespace(conv1=conv)
x = torch.randn(2, 3, 20, 20, dtype=torch.float64)
conv.double()
ref = conv(x)
ref.square().sum().backward()
g_ref = conv.weight.grad.clone()
conv.weight.grad = None
pad_stem(torch, model, 8)
assert model.conv1 is not conv and model.conv1.conv is conv
assert conv.weight.shape == (16, 3, 7, 7), conv.weight.shape
xp = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, 5))
y = model.conv1(xp)
y.square().sum().backward()
assert torch.allclose(y, ref, rtol=1e-12, atol=1e-12), (y - ref).abs().max()
assert torch.allclose(conv.weight.grad, g_ref, rtol=1e-12, atol=1e-12)
print("ok")
"""


class PadStemTest(unittest.TestCase):
    def test_padded_stem_is_the_same_convolution(self):
        py = python_with_torch()
        if not py:
            if os.environ.get("CI") == "true":
                self.fail("needs a python with torch (CI=true: scripts/install-deps.sh installs python3-torch)")
            self.skipTest("needs a python with torch")
        r = subprocess.run([py, "-c", PROG, HERE], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok")


if __name__ == "__main__":
    unittest.main()
