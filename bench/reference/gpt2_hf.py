#!/usr/bin/env python3
"""gpt2_hf: the PyTorch reference the engine's GPT is compared against.

Hugging Face GPT2LMHeadModel (GPT-2 124M shapes unless told otherwise) trained on
random tokens: SDPA attention, bf16 autocast, fused AdamW (lr 6e-4, betas 0.9/0.95,
weight decay 0.1 on matmul weights and embeddings), gradient clipping at 1.0,
dropout 0: the same step the engine runs. Eager by default, torch.compile
(Inductor's default mode) with --compile; --mode both runs eager, then a fresh
compiled model, in one process (one import; one JSON line each, flushed as it
is done). Each step is timed with CUDA events (forward + backward + clip +
optimizer; generating the random batch is outside the timed region, as in the
engine); warm-up steps are discarded. Prints one JSON line per mode: median /
p10 / p90 step time, samples/s and tokens/s, achieved TFLOP/s and MFU from the
engine's FLOP formula (docs/engine.md): 6·N·T + 12·L·d·T² per sample, N =
parameters without the position embeddings.

  python3 bench/reference/gpt2_hf.py --micro-batch 16 --seq-len 1024 [--compile | --mode both]
"""
import argparse
import gc
import json
import sys

from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps


def build(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=args.hidden, n_layer=args.layers,
                     n_head=args.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    try:
        model = GPT2LMHeadModel._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, AttributeError):
        cfg._attn_implementation = "sdpa"
        model = GPT2LMHeadModel(cfg)
    return model


def bench(torch, a, compiled, warmup):
    """Builds a fresh model and optimizer, trains warmup + a.steps steps and
    returns the output line's fields and a function of a path that profiles
    more steps of the same model into it (kernels.py)."""
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build(a).to(dev).train()
    params = list(model.parameters())  # deduplicated: the tied head counts once
    n_params = sum(p.numel() for p in params)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if compiled else model

    B, T = a.micro_batch, a.seq_len
    n_pos = model.config.n_positions * a.hidden
    flops_per_sample = 6.0 * (n_params - n_pos) * T + 12.0 * a.layers * a.hidden * T * T
    name = torch.cuda.get_device_name(dev)
    peak = peak_tflops(name, a.peak_tflops, a.precision)

    gen = torch.Generator(device=dev).manual_seed(1)

    def tokens(_):  # drawn outside the timed step
        return torch.randint(0, 50257, (B, T), device=dev, generator=gen)

    def step(x):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = step_model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = time_steps(torch, step, warmup, a.steps, prepare=tokens)

    preset = "124m" if (a.layers, a.hidden, a.heads) == (12, 768, 12) else f"{a.layers}x{a.hidden}"
    res = {
        "name": "hf-compile" if compiled else "hf-eager",
        "model": f"gpt-{preset}", "reference": "transformers.GPT2LMHeadModel",
        "device_name": name,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "precision": a.precision,
        "micro_batch": B, "seq_len": T,
        "params": n_params,
        "flops_per_sample": flops_per_sample,
        "warmup": warmup, "steps": a.steps,
        **measured_fields(torch, dev, times, losses, B, flops_per_sample, T, peak),
    }
    profile = profiler(torch, step, res, prepare=tokens)
    return res, profile


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
    ap.add_argument("--profile", metavar="FILE", help="after the measured steps, profile more under "
                    "torch.profiler and write the kernel summary to FILE (the compiled run's to FILE-compile "
                    "with --mode both; bench/reference/kernels.py)")
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
        warmup = a.warmup or (10 if compiled else 5)
        res, profile = bench(torch, a, compiled, warmup)
        print(json.dumps(res), flush=True)
        if a.profile:
            profile(mode_path(a.profile, compiled, MODES[a.mode]))
        del profile
        gc.collect()  # free the first model before the next is built
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
