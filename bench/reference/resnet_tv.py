#!/usr/bin/env python3
"""torchvision resnet50 training-step benchmark: the reference the engine's
resnet50 family is compared against (docs/perf.md, bench/reference/README.md).

AMP bf16 autocast, channels_last model and input, SGD with momentum 0.9 and
weight decay 1e-4 on every parameter, synthetic images on the device. Prints
one JSON line.

    python3 bench/reference/resnet_tv.py --micro-batch 256 --image-size 224
    python3 bench/reference/resnet_tv.py --micro-batch 256 --image-size 224 --compile
"""
import argparse
import json
import statistics
import sys

PEAK_TFLOPS = [("H200", 989.4), ("H100", 989.4), ("A100", 312.0), ("L40S", 362.05)]


def peak_tflops(name, override):
    if override > 0:
        return override
    for key, tf in PEAK_TFLOPS:
        if key in name:
            return tf
    return 0.0


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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--micro-batch", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=10, help="discarded steps (compilation happens here)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU; 0: by device name")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if not 32 <= a.image_size <= 1024:
        p.error(f"--image-size {a.image_size}: use 32..1024 pixels")
    if a.micro_batch < 2 or a.steps < 1 or a.warmup < 0:
        p.error("--micro-batch must be at least 2 (BatchNorm), --steps at least 1, --warmup at least 0")

    import torch
    import torchvision

    if not torch.cuda.is_available():
        sys.exit("resnet_tv.py: needs a CUDA device")
    torch.manual_seed(a.seed)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = torchvision.models.resnet50().to(dev, memory_format=fmt).train()
    params = sum(p.numel() for p in model.parameters())
    macs = forward_macs(torch, model, a.image_size, dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    fwd = torch.compile(model) if a.compile else model
    g = torch.Generator(device=dev).manual_seed(a.seed)
    batches = [(torch.randn(a.micro_batch, 3, a.image_size, a.image_size, generator=g,
                            device=dev).contiguous(memory_format=fmt),
                torch.randint(0, 1000, (a.micro_batch,), generator=g, device=dev))
               for _ in range(2)]
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i):
        x, y = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(a.steps)]
    for i, (s, e) in enumerate(events):
        s.record()
        loss = step(i)
        e.record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in events)
    q = statistics.quantiles(ms, n=10) if len(ms) >= 2 else [ms[0]] * 9
    med = statistics.median(ms)
    samples_s = a.micro_batch / (med / 1e3)
    fps = 3.0 * 2.0 * macs  # training = 3 x forward; 2 FLOPs per multiply-accumulate
    tflops = samples_s * fps / 1e12
    name = torch.cuda.get_device_name(dev)
    peak = peak_tflops(name, a.peak_tflops)
    print(json.dumps({
        "model": "resnet50", "reference": "torchvision.models.resnet50",
        "mode": "compile" if a.compile else "eager", "precision": "bf16",
        "micro_batch": a.micro_batch, "image_size": a.image_size,
        "channels_last": a.channels_last, "params": params,
        "samples_per_s": samples_s, "tokens_per_s": 0.0,
        "step_ms_median": med, "step_ms_p10": q[0], "step_ms_p90": q[-1],
        "flops_per_sample": fps, "tflops": tflops, "mfu": tflops / peak if peak else None,
        "peak_tflops": peak, "peak_mem_bytes": torch.cuda.max_memory_allocated(dev),
        "loss": loss.item(), "steps": a.steps, "warmup": a.warmup, "device": name,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()
