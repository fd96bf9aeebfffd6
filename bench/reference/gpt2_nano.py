#!/usr/bin/env python3
"""gpt2_nano: the strongest GPT-2 recipe practitioners run, as the engine's bar.

A nanoGPT-style GPT-2 124M (Karpathy's nanoGPT / build-nanogpt model.py):
nn.Linear layers, LayerNorm with bias, F.scaled_dot_product_attention with
is_causal=True, GELU (tanh, as GPT-2), the vocabulary padded to 50,304, the
output head tied to the token embedding, no dropout; bf16 autocast, the logits
cast to float before cross_entropy, fused AdamW (lr 6e-4, betas 0.9/0.95,
weight decay 0.1 on matmul weights and embeddings), gradient clipping at 1.0.
Eager (nano-eager) or under torch.compile in Inductor's default mode
(nano-compile); --mode both runs eager, then a fresh compiled model, in one
process. Steps timed with CUDA events as the other references (common.py);
FLOPs per sample are the engine's formula with the real vocabulary (50,257),
so MFU and throughput ratios agree with the engine's.

--precision fp8 is the engine's precision fp8 recipe in PyTorch (its
reference): the blocks' linear layers through torch._scaled_mm, activations
and weights in float8 e4m3 scaled from their current amax per tensor (or per
row, --fp8-scaling row), the backward's output gradients in e5m2 (or e4m3,
--fp8-grad), dX and dW through _scaled_mm too, the output in bf16; the
forward with fast accumulation, the backward without; everything else under
bf16 autocast, the tied head included (engine/native/src/fp8_linear.h). Under
torch.compile the quantization's elementwise work fuses into few kernels.

  python3 bench/reference/gpt2_nano.py --micro-batch 16 --seq-len 1024 [--mode both] [--precision fp8]
"""
import argparse
import gc
import json
import math
import sys

from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps

VOCAB, PADDED_VOCAB, POSITIONS = 50257, 50304, 1024


def fp8_linear(torch, scaling, grad):
    """nn.Linear whose products run in FP8 through torch._scaled_mm (the
    engine's recipe, engine/native/src/fp8_linear.cpp)."""
    e4 = torch.float8_e4m3fn
    g8 = torch.float8_e5m2 if grad == "e5m2" else e4
    row = scaling == "row"

    def quant(t, dt, dim):
        """t ~ q * inv: amax over all of t (dim None, inv [1, 1]), each row
        (dim 1, [rows, 1]) or each column (dim 0, [1, cols]) to dt's max."""
        fmax = torch.finfo(dt).max
        a = t.float().abs()
        amax = (a.amax() if dim is None else a.amax(dim=dim, keepdim=True)).clamp(min=1e-12)
        if dim is None:
            amax = amax.reshape(1, 1)
        return (t.float() * (fmax / amax)).to(dt), amax / fmax

    def mm(a, b, sa, sb, out, bias=None, fast=False):
        return torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out, use_fast_accum=fast)

    def col_major(m):
        return m.t().contiguous().t()

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            with torch.autocast("cuda", enabled=False):
                shape = x.shape
                x2 = x.reshape(-1, shape[-1])
                ax = 1 if row else None
                xq, xs = quant(x2, e4, ax)
                wq, ws = quant(w, e4, ax)
                y = mm(xq, wq.t(), xs, ws.reshape(1, -1), torch.bfloat16, b.to(torch.bfloat16), True)
                ctx.save_for_backward(*((x2, w) if row else (xq, xs, wq, ws)))
                ctx.shape, ctx.x_dtype = shape, x.dtype
                return y.view(*shape[:-1], w.shape[0])

        @staticmethod
        def backward(ctx, dy):
            with torch.autocast("cuda", enabled=False):
                dy = dy.reshape(-1, dy.shape[-1]).contiguous()
                db = dy.float().sum(0)
                if not row:
                    xq, xs, wq, ws = ctx.saved_tensors
                    gq, gs = quant(dy, g8, None)
                    dx = mm(gq, col_major(wq), gs, ws, torch.bfloat16)
                    dw = mm(gq.t().contiguous(), col_major(xq), gs, xs, torch.float32)
                else:  # the scales along the dimensions not summed over
                    x2, w = ctx.saved_tensors
                    gq, gs = quant(dy, g8, 1)
                    wq, ws = quant(w, e4, 0)
                    dx = mm(gq, col_major(wq), gs, ws, torch.bfloat16)
                    gq, gs = quant(dy, g8, 0)
                    xq, xs = quant(x2, e4, 0)
                    dw = mm(gq.t().contiguous(), col_major(xq), gs.reshape(-1, 1), xs, torch.float32)
                return dx.to(ctx.x_dtype).view(ctx.shape), dw, db

    class Fp8Linear(torch.nn.Linear):
        def forward(self, x):
            return Fn.apply(x, self.weight, self.bias)

    return Fp8Linear


def build(torch, a):
    nn, F = torch.nn, torch.nn.functional
    d, L, H = a.hidden, a.layers, a.heads
    # The blocks' linear layers (not the tied head): FP8 under --precision fp8.
    Linear = fp8_linear(torch, a.fp8_scaling, a.fp8_grad) if a.precision == "fp8" else nn.Linear

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = Linear(d, 3 * d)
            self.c_proj = Linear(d, d)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = Linear(d, 4 * d)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = Linear(4 * d, d)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(d), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(d), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(PADDED_VOCAB, d)
            self.wpe = nn.Embedding(POSITIONS, d)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, PADDED_VOCAB, bias=False)
            self.wte.weight = self.lm_head.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
                elif p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            T = idx.size(1)
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def bench(torch, a, compiled, warmup):
    """A fresh model and optimizer, warmup + a.steps steps: the output line's
    fields and a function of a path that profiles more steps (kernels.py)."""
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build(torch, a).to(dev).train()
    params = list(model.parameters())  # the tied head counts once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if compiled else model

    B, T = a.micro_batch, a.seq_len
    n_params = sum(p.numel() for p in params)
    # The engine's formula (docs/engine.md) with the real vocabulary: the padding
    # rows of the embedding and the position embeddings do not count.
    n = n_params - (PADDED_VOCAB - VOCAB) * a.hidden - POSITIONS * a.hidden
    flops_per_sample = 6.0 * n * T + 12.0 * a.layers * a.hidden * T * T
    name = torch.cuda.get_device_name(dev)
    # fp8: against the bf16 peak, as the engine (MFU compares across precisions).
    peak = peak_tflops(name, a.peak_tflops, "bf16" if a.precision == "fp8" else a.precision)
    gen = torch.Generator(device=dev).manual_seed(1)

    def batch(_):  # drawn outside the timed step
        t = torch.randint(0, VOCAB, (B, T + 1), device=dev, generator=gen)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def step(xy):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision in ("bf16", "fp8")):
            loss = step_model(*xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = time_steps(torch, step, warmup, a.steps, prepare=batch)
    preset = "124m" if (a.layers, a.hidden, a.heads) == (12, 768, 12) else f"{a.layers}x{a.hidden}"
    res = {
        "name": "nano-compile" if compiled else "nano-eager",
        "model": f"gpt-{preset}", "reference": "nanoGPT-style GPT-2 (SDPA, padded vocabulary, tied head)",
        "device_name": name, "torch": torch.__version__,
        "precision": a.precision, "micro_batch": B, "seq_len": T,
        **({"fp8_scaling": a.fp8_scaling, "fp8_grad": a.fp8_grad} if a.precision == "fp8" else {}),
        "params": n_params, "flops_per_sample": flops_per_sample,
        "warmup": warmup, "steps": a.steps,
        **measured_fields(torch, dev, times, losses, B, flops_per_sample, T, peak),
    }
    return res, profiler(torch, step, res, prepare=batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--precision", choices=["bf16", "fp32", "fp8"], default="bf16")
    ap.add_argument("--fp8-scaling", choices=["tensor", "row"], default="tensor")
    ap.add_argument("--fp8-grad", choices=["e5m2", "e4m3"], default="e5m2")
    ap.add_argument("--compile", action="store_true", help="same as --mode compile")
    ap.add_argument("--mode", choices=sorted(MODES), default="eager",
                    help="both: eager, then compiled, one JSON line each")
    ap.add_argument("--warmup", type=int, default=0, help="0: 5 eager, 10 compiled")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--peak-tflops", type=float, default=0)
    ap.add_argument("--profile", metavar="FILE", help="profile more steps under torch.profiler into FILE "
                    "(the compiled run's to FILE-compile with --mode both; bench/reference/kernels.py)")
    a = ap.parse_args()
    if a.compile:
        a.mode = "compile"
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for compiled in MODES[a.mode]:
        res, profile = bench(torch, a, compiled, a.warmup or (10 if compiled else 5))
        print(json.dumps(res), flush=True)
        if a.profile:
            profile(mode_path(a.profile, compiled, MODES[a.mode]))
        del profile
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
