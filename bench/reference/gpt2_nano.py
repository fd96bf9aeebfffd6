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

  python3 bench/reference/gpt2_nano.py --micro-batch 16 --seq-len 1024 [--mode both]
"""
import argparse
import gc
import json
import math
import sys

from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps

VOCAB, PADDED_VOCAB, POSITIONS = 50257, 50304, 1024


def build(torch, a):
    nn, F = torch.nn, torch.nn.functional
    d, L, H = a.hidden, a.layers, a.heads

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(d, 4 * d)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * d, d)

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
    peak = peak_tflops(name, a.peak_tflops, a.precision)
    gen = torch.Generator(device=dev).manual_seed(1)

    def batch(_):  # drawn outside the timed step
        t = torch.randint(0, VOCAB, (B, T + 1), device=dev, generator=gen)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def step(xy):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
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
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
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
