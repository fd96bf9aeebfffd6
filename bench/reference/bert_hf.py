#!/usr/bin/env python3
"""Hugging Face BertForPreTraining training-step benchmark: the reference the
engine's bert family is compared against (docs/perf.md, bench/reference/README.md).

bf16 autocast, SDPA attention, fused AdamW (no decay for biases and LayerNorm
weights), gradient clipping at 1.0, dropout 0: the step the engine runs.
Synthetic full-length batches with round(0.15*T) masked positions per sequence
and NSP labels, made before timing. Each step is timed with CUDA events;
warm-up steps are discarded. Prints one JSON line per mode in the contract of
gpt2_hf.py (bench/reference/README.md); --mode both runs eager, then a fresh
compiled model (Inductor's default mode), in one process.

    python3 bench/reference/bert_hf.py --preset large --micro-batch 32 --seq-len 128
    python3 bench/reference/bert_hf.py --preset large --micro-batch 32 --seq-len 512 --compile
    python3 bench/reference/bert_hf.py --seq-len 128 --mode both --warmup 5 --steps 20
"""
import argparse
import gc
import json
import sys

from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps

PRESETS = {  # layers, hidden, heads, intermediate (bert-base/large-uncased)
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}
VOCAB, POSITIONS = 30522, 512


def masked_per_sequence(seq_len):
    return max(1, round(0.15 * seq_len))


def flops_per_sample(layers, hidden, inter, seq_len):
    """Training FLOPs of one sample, the engine's formula (engine/native/src/bert.cpp):
    3 x forward; forward = dense layers 2T(4H^2+2HI) + attention 4T^2H per layer,
    pooler + NSP, and the MLM head (transform + decoder) on the masked positions."""
    h, i, t, k = hidden, inter, seq_len, masked_per_sequence(seq_len)
    layer = 2 * t * (4 * h * h + 2 * h * i) + 4 * t * t * h
    fwd = layers * layer + 2 * h * h + 4 * h + k * (2 * h * h + 2 * h * VOCAB)
    return 3.0 * fwd


def make_batches(torch, n, batch, seq_len, device, seed):
    """n synthetic batches: [CLS] A [SEP] B [SEP], k masked positions (80/10/10)."""
    g = torch.Generator(device=device).manual_seed(seed)
    k = masked_per_sequence(seq_len)
    len_a = (seq_len - 3) // 2
    out = []
    for _ in range(n):
        ids = torch.randint(4, VOCAB, (batch, seq_len), generator=g, device=device)
        ids[:, 0], ids[:, len_a + 1], ids[:, -1] = 101, 102, 102
        types = torch.zeros_like(ids)
        types[:, len_a + 2:] = 1
        score = torch.rand(batch, seq_len, generator=g, device=device)
        score[:, [0, len_a + 1, seq_len - 1]] = -1
        pos = score.topk(k, dim=1).indices
        labels = torch.full_like(ids, -100).scatter_(1, pos, ids.gather(1, pos))
        r = torch.rand(batch, k, generator=g, device=device)
        rnd = torch.randint(4, VOCAB, (batch, k), generator=g, device=device)
        repl = torch.where(r < 0.8, torch.full_like(rnd, 103), torch.where(r < 0.9, rnd, ids.gather(1, pos)))
        ids.scatter_(1, pos, repl)
        nsp = torch.randint(0, 2, (batch,), generator=g, device=device)
        out.append((ids, types, labels, nsp))
    return out


def bench(torch, a, compiled):
    """Builds a fresh model and optimizer, trains a.warmup + a.steps steps and
    returns the output line's fields and a function of a path that profiles
    more steps of the same model into it (kernels.py)."""
    from transformers import BertConfig, BertForPreTraining

    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    layers, hidden, heads, inter = PRESETS[a.preset]
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter,
                     max_position_embeddings=POSITIONS, type_vocab_size=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    try:
        model = BertForPreTraining._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError, AttributeError):
        cfg._attn_implementation = "sdpa"
        model = BertForPreTraining(cfg)
    model = model.to(dev).train()
    params = list(model.parameters())  # deduplicated: the tied decoder counts once
    n_params = sum(p.numel() for p in params)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(s in n for s in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(s in n for s in no_decay)],
         "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=a.lr, fused=True)
    fwd = torch.compile(model) if compiled else model
    batches = make_batches(torch, 4, a.micro_batch, a.seq_len, dev, a.seed)

    def step(i):
        ids, types, labels, nsp = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(input_ids=ids, token_type_ids=types, labels=labels,
                       next_sentence_label=nsp).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses = time_steps(torch, step, a.warmup, a.steps)
    fps = flops_per_sample(layers, hidden, inter, a.seq_len)
    name = torch.cuda.get_device_name(dev)
    res = {
        "name": "hf-compile" if compiled else "hf-eager",
        "model": f"bert-{a.preset}", "reference": "transformers.BertForPreTraining",
        "device_name": name, "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "precision": "bf16", "micro_batch": a.micro_batch, "seq_len": a.seq_len,
        "params": n_params, "flops_per_sample": fps, "warmup": a.warmup, "steps": a.steps,
        **measured_fields(torch, dev, times, losses, a.micro_batch, fps, a.seq_len,
                          peak_tflops(name, a.peak_tflops)),
    }
    profile = profiler(torch, step, res)
    return res, profile


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="large")
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128, help="8..512")
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=10, help="discarded steps (compilation happens here)")
    p.add_argument("--compile", action="store_true", help="same as --mode compile")
    p.add_argument("--mode", choices=sorted(MODES), default="eager",
                   help="both: eager, then compiled, one JSON line each")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU; 0: by device name")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", metavar="FILE", help="after the measured steps, profile more under "
                   "torch.profiler and write the kernel summary to FILE (the compiled run's to FILE-compile "
                   "with --mode both; bench/reference/kernels.py)")
    a = p.parse_args(argv)
    if not 8 <= a.seq_len <= POSITIONS:
        p.error(f"--seq-len {a.seq_len}: use 8..{POSITIONS} (BERT has {POSITIONS} position embeddings)")
    if a.micro_batch < 1 or a.steps < 1 or a.warmup < 0:
        p.error("--micro-batch and --steps must be at least 1, --warmup at least 0")
    if a.compile:
        a.mode = "compile"

    import torch

    if not torch.cuda.is_available():
        sys.exit("bert_hf.py: needs a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False  # as the engine in bf16
    torch.backends.cudnn.allow_tf32 = False
    for compiled in MODES[a.mode]:
        res, profile = bench(torch, a, compiled)
        print(json.dumps(res), flush=True)
        if a.profile:
            profile(mode_path(a.profile, compiled, MODES[a.mode]))
        del profile
        gc.collect()  # free the first model before the next is built
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
