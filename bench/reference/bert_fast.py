#!/usr/bin/env python3
"""bert_fast: the fastest BERT pre-training step built from public practice, as
the engine's BERT bar next to Hugging Face's (bert_hf.py).

BERT-large (or base) written the way fast implementations write it (NVIDIA's
DeepLearningExamples BERT, MosaicML's and nanoGPT-style code): one nn.Linear for
q, k and v, F.scaled_dot_product_attention (flash attention, no mask: full-length
sequences), post-LayerNorm blocks, GELU straight after the intermediate matmul
(Inductor fuses it into the bias epilogue's neighbour), the MLM head only on the
masked positions (NVIDIA's sparse prediction: a fixed round(0.15 T) per
sequence, so shapes stay static), decoder tied to the word embeddings, NSP head;
dropout 0; bf16 autocast, fused AdamW (no decay for biases and LayerNorm
weights), gradient clipping at 1.0. The same batches as bert_hf.py. Eager
(fast-eager) or under torch.compile in Inductor's default mode (fast-compile);
--mode both runs eager, then a fresh compiled model, in one process. FLOPs per
sample are the engine's formula (bert_hf.flops_per_sample).

  python3 bench/reference/bert_fast.py --preset large --micro-batch 32 --seq-len 512 --mode both
"""
import argparse
import gc
import json
import sys

from bert_hf import POSITIONS, PRESETS, VOCAB, flops_per_sample, make_batches, masked_per_sequence
from common import MODES, measured_fields, mode_path, peak_tflops, profiler, time_steps


def build(torch, preset):
    nn, F = torch.nn, torch.nn.functional
    L, H, heads, inter = PRESETS[preset]
    eps = 1e-12

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(H, 3 * H)
            self.attn_out = nn.Linear(H, H)
            self.attn_norm = nn.LayerNorm(H, eps=eps)
            self.inter = nn.Linear(H, inter)
            self.out = nn.Linear(inter, H)
            self.out_norm = nn.LayerNorm(H, eps=eps)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, heads, H // heads).unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            h = self.attn_norm(x + self.attn_out(a.transpose(1, 2).reshape(B, T, H)))
            return self.out_norm(h + self.out(F.gelu(self.inter(h))))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(VOCAB, H)
            self.position = nn.Embedding(POSITIONS, H)
            self.token_type = nn.Embedding(2, H)
            self.emb_norm = nn.LayerNorm(H, eps=eps)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.pooler = nn.Linear(H, H)
            self.nsp = nn.Linear(H, 2)
            self.transform = nn.Linear(H, H)
            self.transform_norm = nn.LayerNorm(H, eps=eps)
            self.decoder_bias = nn.Parameter(torch.zeros(VOCAB))
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

        def forward(self, ids, types, labels, nsp_labels):
            B, T = ids.shape
            pos = torch.arange(T, device=ids.device)
            x = self.emb_norm(self.word(ids) + self.position(pos) + self.token_type(types))
            for layer in self.layers:
                x = layer(x)
            # The masked positions only: exactly k per sequence (static shapes).
            k = masked_per_sequence(T)
            where = (labels != -100).float().topk(k, dim=1).indices
            hm = x.gather(1, where.unsqueeze(-1).expand(B, k, H))
            t = self.transform_norm(F.gelu(self.transform(hm)))
            logits = F.linear(t, self.word.weight, self.decoder_bias)
            mlm = F.cross_entropy(logits.float().view(B * k, -1), labels.gather(1, where).view(-1))
            pooled = torch.tanh(self.pooler(x[:, 0]))
            return mlm + F.cross_entropy(self.nsp(pooled).float(), nsp_labels)

    return Bert()


def bench(torch, a, compiled):
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    model = build(torch, a.preset).to(dev).train()
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "norm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "norm" in n]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, fused=True)
    fwd = torch.compile(model) if compiled else model
    batches = make_batches(torch, 4, a.micro_batch, a.seq_len, dev, a.seed)

    def step(i):
        ids, types, labels, nsp = batches[i % len(batches)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(ids, types, labels, nsp)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    warmup = a.warmup or (10 if compiled else 5)
    times, losses = time_steps(torch, step, warmup, a.steps)
    layers, hidden, _, inter = PRESETS[a.preset]
    fps = flops_per_sample(layers, hidden, inter, a.seq_len)
    name = torch.cuda.get_device_name(dev)
    res = {
        "name": "fast-compile" if compiled else "fast-eager",
        "model": f"bert-{a.preset}",
        "reference": "BERT from public practice (fused qkv, SDPA, sparse MLM head, tied decoder)",
        "device_name": name, "torch": torch.__version__,
        "precision": "bf16", "micro_batch": a.micro_batch, "seq_len": a.seq_len,
        "params": n_params, "flops_per_sample": fps, "warmup": warmup, "steps": a.steps,
        **measured_fields(torch, dev, times, losses, a.micro_batch, fps, a.seq_len,
                          peak_tflops(name, a.peak_tflops)),
    }
    return res, profiler(torch, step, res)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), default="large")
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128, help="8..512")
    p.add_argument("--steps", type=int, default=20, help="measured steps")
    p.add_argument("--warmup", type=int, default=0, help="discarded steps; 0: 5 eager, 10 compiled")
    p.add_argument("--compile", action="store_true", help="same as --mode compile")
    p.add_argument("--mode", choices=sorted(MODES), default="eager",
                   help="both: eager, then compiled, one JSON line each")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU; 0: by device name")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", metavar="FILE", help="profile more steps under torch.profiler into FILE "
                   "(the compiled run's to FILE-compile with --mode both; bench/reference/kernels.py)")
    a = p.parse_args(argv)
    if not 8 <= a.seq_len <= POSITIONS:
        p.error(f"--seq-len {a.seq_len}: use 8..{POSITIONS}")
    if a.micro_batch < 1 or a.steps < 1 or a.warmup < 0:
        p.error("--micro-batch and --steps must be at least 1, --warmup at least 0")
    if a.compile:
        a.mode = "compile"
    import torch

    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        sys.exit(1)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for compiled in MODES[a.mode]:
        res, profile = bench(torch, a, compiled)
        print(json.dumps(res), flush=True)
        if a.profile:
            profile(mode_path(a.profile, compiled, MODES[a.mode]))
        del profile
        gc.collect()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
