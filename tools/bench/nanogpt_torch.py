#!/usr/bin/env python3
"""nanoGPT-style GPT-2 in PyTorch: the baseline that `llmtrain --device cuda` is measured against.

Same architecture as train/ (learned positions, pre-LayerNorm, GELU tanh, tied embeddings,
biases everywhere, vocabulary padded to a multiple of 128 with the padding never predicted),
bf16 autocast, F.scaled_dot_product_attention (flash on the GPU), torch.compile, fused AdamW,
the same micro-batch (rows x seq-len), same number of steps.

Data: the shard set of `--data DIR` through the numpy reader in tools/python/ when one is
there (see torch_bench_common.open_reader for what it looks for); otherwise random tokens, and the JSON line
says so ("data": "random: ..."). Throughput does not depend on the token values.

Output: one JSON line on stdout (everything else goes to stderr):
  {"impl": "torch", "tokens_per_s": ..., "peak_mem_bytes": ..., "step_ms_median": ..., ...}

  python3 tools/bench/nanogpt_torch.py --model d12 --seq-len 1024 --batch 16 --steps 30
  python3 tools/bench/nanogpt_torch.py --check     # imports + a 2-step tiny run on the CPU
"""
import argparse
import json
import math
import sys

import torch_bench_common as tbc  # the reader, device, optimizer, batches, timed loop, JSON fields

PRESETS = {  # layers, heads, dim: the same presets as train/ (issue 6)
    "tiny": (2, 2, 64),
    "d12": (12, 12, 768),
    "d24": (24, 16, 1024),
    "d36": (36, 20, 1280),
    "d48": (48, 25, 1600),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="d12", choices=sorted(PRESETS))
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16, help="rows per micro-batch")
    p.add_argument("--steps", type=int, default=30, help="timed optimiser steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compile happens here)")
    p.add_argument("--vocab-size", type=int, default=50257, help="before padding to a multiple of 128")
    p.add_argument("--data", default="", help="shard set directory (numpy reader in tools/python)")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--check", action="store_true",
                   help="dry check: imports, model build, 2 steps of the tiny model on the CPU, no compile")
    return p.parse_args(argv)


def build_model(torch, nn, F, n_layer, n_head, n_embd, vocab_padded, vocab_real, seq_len):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.c_proj(y)
            x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab_padded, n_embd)
            self.wpe = nn.Embedding(seq_len, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.apply(self._init)
            for name, prm in self.named_parameters():  # GPT-2 scaled init of the residual projections
                if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                    nn.init.normal_(prm, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        @staticmethod
        def _init(m):
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets):
            B, T = idx.shape
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            x = self.ln_f(x)
            logits = F.linear(x, self.wte.weight)  # tied embeddings
            # the padding of the vocabulary is never predicted
            logits = logits[..., :vocab_real]
            return F.cross_entropy(logits.float().reshape(-1, vocab_real), targets.reshape(-1),
                                   ignore_index=-1)

    return GPT()


def main(argv=None):
    args = parse_args(argv)
    if args.check:
        args.model, args.seq_len, args.batch, args.steps, args.warmup = "tiny", 64, 2, 2, 0
        args.device, args.no_compile, args.vocab_size = "cpu", True, 512
    try:
        import numpy as np
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(json.dumps({"impl": "torch", "error": f"import failed: {e}"}))
        return 2

    dev = tbc.device(torch, args.device, args.seed, "torch")
    if dev is None:
        return 2

    L, H, C = PRESETS[args.model]
    T, B = args.seq_len, args.batch
    Vp = (args.vocab_size + 127) // 128 * 128
    model = build_model(torch, nn, F, L, H, C, Vp, args.vocab_size, T).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = tbc.adamw(torch, model, args.lr, dev)
    step_model = model if args.no_compile else torch.compile(model)

    rows, data_desc = tbc.open_reader(args.data, T)
    next_batch = tbc.batches(torch, np, rows, B, T, args.vocab_size, dev, ignore=-1)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=(args.precision == "bf16"))

    def one_step():
        xb, yb = next_batch()
        with amp:
            loss = step_model(xb, yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses, warm_s = tbc.timed(torch, dev, one_step, args.warmup, args.steps, cuda_events=True)
    head = {
        "impl": "torch", "torch": torch.__version__, "model": args.model, "layers": L, "heads": H,
        "dim": C, "seq_len": T, "batch": B, "vocab": args.vocab_size, "vocab_padded": Vp,
        "params": n_params, "steps": args.steps, "precision": args.precision,
        "compile": not args.no_compile,
    }
    print(json.dumps(tbc.result(torch, head, dev, B, T, times, losses, warm_s, data_desc)), flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
