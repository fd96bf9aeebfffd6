#!/usr/bin/env python3
"""torchvision resnet50 training-step benchmark: the reference the engine's
resnet50 family is compared against (docs/perf.md, bench/reference/README.md).

AMP bf16 autocast (--precision fp16: fp16 autocast with torch.amp.GradScaler,
the gradients unscaled before clipping), channels_last model and input, SGD with momentum 0.9 and
weight decay 1e-4 on every parameter, gradient clipping at 1.0 (as the engine's
step), synthetic images made on the device before timing. Each step is timed
with CUDA events; warm-up steps are discarded. Prints one JSON line per mode
in the contract of gpt2_hf.py (bench/reference/README.md); --mode both runs
eager, then a fresh compiled model (Inductor's default mode), in one process.

    python3 bench/reference/resnet_tv.py --micro-batch 256 --image-size 224
    python3 bench/reference/resnet_tv.py --micro-batch 256 --image-size 224 --compile
    python3 bench/reference/resnet_tv.py --mode both --warmup 5 --steps 20

--pad-stem runs the first convolution over its 3 input channels padded with
zeros to 8 (the images made so, the weight padded in the forward pass), so
that cuDNN has 16-byte-aligned channels_last kernels for it as for every other
layer (tv-padstem-*, tv-fp16-padstem-*): 0.6 ms faster compiled in bf16 at
256 x 224 on the H200 (docs/perf.md), so it is one of the references.
"""
import argparse
import gc
import json
import sys

from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps


def forward_macs(torch, model, image_size, device):
    """Multiply-accumulates of one image's forward pass through the convolutions
    and the fc, counted with forward hooks (4.09 G at 224, torchvision's "GFLOPS")."""
    total = [0]

    def conv(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * (m.in_channels // m.groups)
        total[0] += k * out.shape[1] * out.shape[2] * out.shape[3]

    def fc(m, inp, out):
        total[0] += m.in_features * m.out_features

    hooks = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(fc))
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, image_size, image_size, device=device))
    model.train()
    for h in hooks:
        h.remove()
    return total[0]


def pad_stem(torch, model, channels):
    """Replaces model.conv1 by the same convolution over `channels` input
    channels: the weight (still 3 channels, the parameter) padded with zeros in
    the forward pass; the input must come padded."""
    conv = model.conv1
    extra = channels - conv.in_channels
    F = torch.nn.functional

    class PaddedStem(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x):
            w = F.pad(conv.weight, (0, 0, 0, 0, 0, extra))
            return F.conv2d(x, w, None, conv.stride, conv.padding)

    model.conv1 = PaddedStem()


def bench(torch, torchvision, a, compiled):
    """Builds a fresh model and optimizer, trains a.warmup + a.steps steps and
    returns the output line's fields and a function of a path that profiles
    more steps of the same model into it (kernels.py)."""
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().to(dev, memory_format=fmt).train()
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    macs = forward_macs(torch, model, a.image_size, dev)  # over the 3 channels
    in_ch = 8 if a.pad_stem else 3
    if a.pad_stem:
        pad_stem(torch, model, in_ch)
    opt = torch.optim.SGD(params, lr=a.lr, momentum=0.9, weight_decay=1e-4)
    fwd = torch.compile(model) if compiled else model
    g = torch.Generator(device=dev).manual_seed(a.seed)
    batches = [(torch.nn.functional.pad(torch.randn(a.micro_batch, 3, a.image_size, a.image_size, generator=g,
                                                    device=dev), (0, 0, 0, 0, 0, in_ch - 3)).contiguous(memory_format=fmt),
                torch.randint(0, 1000, (a.micro_batch,), generator=g, device=dev))
               for _ in range(2)]
    loss_fn = torch.nn.CrossEntropyLoss()
    fp16 = a.precision == "fp16"
    dtype = torch.float16 if fp16 else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=fp16)

    def step(i):
        x, y = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=dtype):
            loss = loss_fn(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = time_steps(torch, step, a.warmup, a.steps)
    fps = 3.0 * 2.0 * macs  # training = 3 x forward; 2 FLOPs per multiply-accumulate
    name = torch.cuda.get_device_name(dev)
    res = {
        "name": ("tv-fp16-" if fp16 else "tv-") + ("padstem-" if a.pad_stem else "") + ("compile" if compiled else "eager"),
        "model": "resnet50", "reference": "torchvision.models.resnet50",
        "device_name": name, "torch": torch.__version__, "torchvision": torchvision.__version__,
        "precision": a.precision, "micro_batch": a.micro_batch, "image_size": a.image_size,
        "channels_last": a.channels_last, "pad_stem": a.pad_stem, "params": n_params, "flops_per_sample": fps,
        "warmup": a.warmup, "steps": a.steps,
        **measured_fields(torch, dev, times, losses, a.micro_batch, fps, 0,
                          peak_tflops(name, a.peak_tflops, "bf16")),  # fp16's dense peak is bf16's
    }
    profile = profiler(torch, step, res)
    return res, profile


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--micro-batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=10, help="discarded steps (compilation happens here)")
    p.add_argument("--compile", action="store_true", help="same as --mode compile")
    p.add_argument("--mode", choices=sorted(MODES), default="eager",
                   help="both: eager, then compiled, one JSON line each")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--precision", choices=["bf16", "fp16"], default="bf16",
                   help="autocast dtype; fp16 with a GradScaler (tv-fp16-eager, tv-fp16-compile)")
    p.add_argument("--pad-stem", action="store_true",
                   help="the first convolution over input and weight padded with zeros to 8 channels")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU; 0: by device name")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", metavar="FILE", help="after the measured steps, profile more under "
                   "torch.profiler and write the kernel summary to FILE (the compiled run's to FILE-compile "
                   "with --mode both; bench/reference/kernels.py)")
    a = p.parse_args(argv)
    if not 32 <= a.image_size <= 1024:
        p.error(f"--image-size {a.image_size}: use 32..1024 pixels")
    if a.micro_batch < 2 or a.steps < 1 or a.warmup < 0:
        p.error("--micro-batch must be at least 2 (BatchNorm), --steps at least 1, --warmup at least 0")
    if a.compile:
        a.mode = "compile"

    import torch
    import torchvision

    if not torch.cuda.is_available():
        sys.exit("resnet_tv.py: needs a CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False  # as the engine in bf16
    torch.backends.cudnn.allow_tf32 = False
    for compiled in MODES[a.mode]:
        res, profile = bench(torch, torchvision, a, compiled)
        print(json.dumps(res), flush=True)
        if a.profile:
            profile(mode_path(a.profile, compiled, MODES[a.mode]))
        del profile
        gc.collect()  # free the first model before the next is built
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
