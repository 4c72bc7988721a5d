#!/usr/bin/env python3
"""nanoGPT-style GPT-2 in PyTorch: the baseline that `llmtrain --device cuda` is measured against.

Same architecture as train/ (learned positions, pre-LayerNorm, GELU tanh, tied embeddings,
biases everywhere, vocabulary padded to a multiple of 128 with the padding never predicted),
bf16 autocast, F.scaled_dot_product_attention (flash on the GPU), torch.compile, fused AdamW,
the same micro-batch (rows x seq-len), same number of steps.

Data: the shard set of `--data DIR` through the numpy reader in tools/python/ when one is
there (see _open_reader for what it looks for); otherwise random tokens, and the JSON line
says so ("data": "random: ..."). Throughput does not depend on the token values.

Output: one JSON line on stdout (everything else goes to stderr):
  {"impl": "torch", "tokens_per_s": ..., "peak_mem_bytes": ..., "step_ms_median": ..., ...}

  python3 tools/bench/nanogpt_torch.py --model d12 --seq-len 1024 --batch 16 --steps 30
  python3 tools/bench/nanogpt_torch.py --check     # imports + a 2-step tiny run on the CPU
"""
import argparse
import glob
import importlib
import json
import math
import os
import statistics
import sys
import time

PRESETS = {  # layers, heads, dim: the same presets as train/ (issue 6)
    "tiny": (2, 2, 64),
    "d12": (12, 12, 768),
    "d24": (24, 16, 1024),
    "d36": (36, 20, 1280),
    "d48": (48, 25, 1600),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


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


def _open_reader(data_dir, seq_len):
    """Returns (next_batch_fn_factory, description). Looks in tools/python for a numpy shard
    reader: a module with open_shards(dir) / ShardSet(dir) / open(dir) whose result has
    .rows (an array [N, L]) or is indexable as rows. Anything else: random tokens."""
    if not data_dir:
        return None, "random: no --data"
    here = os.path.dirname(os.path.abspath(__file__))
    pydir = os.path.normpath(os.path.join(here, "..", "python"))
    if not os.path.isdir(pydir):
        return None, "random: no tools/python"
    sys.path.insert(0, pydir)
    tried = []
    for path in sorted(glob.glob(os.path.join(pydir, "*.py"))):
        mod_name = os.path.splitext(os.path.basename(path))[0]
        if mod_name.startswith("_") or "example" in mod_name or "torch" in mod_name:
            continue
        try:
            mod = importlib.import_module(mod_name)
        except Exception as e:  # a reader that needs something missing: note and go on
            tried.append(f"{mod_name}: {type(e).__name__}")
            continue
        for fn_name in ("open_shards", "ShardSet", "open_set", "open"):
            fn = getattr(mod, fn_name, None)
            if not callable(fn):
                continue
            try:
                obj = fn(data_dir)
            except Exception as e:
                tried.append(f"{mod_name}.{fn_name}: {type(e).__name__}: {e}")
                continue
            if callable(getattr(obj, "row", None)) and callable(getattr(obj, "num_rows", None)):
                # mkshards_reader.ShardSet: row(i) -> {"tokens", "loss_mask", ...}
                class _Rows:
                    def __init__(self, ds):
                        self.ds, self.n = ds, ds.num_rows("train")

                    def __len__(self):
                        return self.n

                    def __getitem__(self, i):
                        r = self.ds.row(i, split="train")
                        return (r["tokens"], r.get("loss_mask"))

                wrapped = _Rows(obj)
                if len(wrapped) == 0:
                    tried.append(f"{mod_name}.{fn_name}: no train rows")
                    continue
                return wrapped, f"shards: {data_dir} via tools/python/{mod_name}.{fn_name} ({len(wrapped)} rows)"
            rows = getattr(obj, "rows", None)
            if callable(rows):
                try:
                    rows = rows()
                except Exception:
                    rows = None
            if rows is None:
                rows = obj
            try:
                n = len(rows)
                first = rows[0]
                if len(first) < seq_len + 1 and len(first) < seq_len:
                    tried.append(f"{mod_name}.{fn_name}: rows of {len(first)} < seq-len {seq_len}")
                    continue
            except Exception as e:
                tried.append(f"{mod_name}.{fn_name}: rows not indexable ({type(e).__name__})")
                continue
            return rows, f"shards: {data_dir} via tools/python/{mod_name}.{fn_name} ({n} rows)"
    return None, "random: no usable reader in tools/python" + (f" ({'; '.join(tried)})" if tried else "")


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

    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"impl": "torch", "error": "no CUDA device visible to torch"}))
        return 2
    torch.manual_seed(args.seed)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    L, H, C = PRESETS[args.model]
    T, B = args.seq_len, args.batch
    Vp = (args.vocab_size + 127) // 128 * 128
    model = build_model(torch, nn, F, L, H, C, Vp, args.vocab_size, T).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt_kw = {"lr": args.lr, "betas": (0.9, 0.95), "eps": 1e-8}
    if dev.type == "cuda":
        opt_kw["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], **opt_kw)
    step_model = model if args.no_compile else torch.compile(model)

    rows, data_desc = _open_reader(args.data, T)
    cursor = [0]

    def next_batch():
        if rows is None:
            x = torch.randint(0, args.vocab_size, (B, T + 1), dtype=torch.int64)
            xb, yb = x[:, :-1], x[:, 1:].clone()
        else:
            idx = [(cursor[0] + i) % len(rows) for i in range(B)]
            cursor[0] += B
            xs, ys = [], []
            for i in idx:
                r = rows[i]
                tok, mask = (r[0], r[1]) if isinstance(r, tuple) else (r, None)
                tok = np.asarray(tok[: T + 1], dtype=np.int64)
                y = np.full(T, -1, dtype=np.int64)  # a target beyond the row carries no loss (as llmtrain)
                y[: len(tok) - 1] = tok[1:T + 1]
                if mask is not None:  # padding targets carry no loss
                    m = np.asarray(mask[1:T + 1])
                    y[: len(m)][m == 0] = -1
                xs.append(tok[:T])
                ys.append(y)
            xb, yb = torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))
        if dev.type == "cuda":
            xb = xb.pin_memory().to(dev, non_blocking=True)
            yb = yb.pin_memory().to(dev, non_blocking=True)
        return xb, yb

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

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        one_step()
    sync()
    warm_s = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for _ in range(args.steps):
        if dev.type == "cuda":
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            loss = one_step()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3)
        else:
            t = time.perf_counter()
            loss = one_step()
            times.append(time.perf_counter() - t)
        losses.append(float(loss.item()))
    med = statistics.median(times)
    out = {
        "impl": "torch", "torch": torch.__version__, "model": args.model, "layers": L, "heads": H,
        "dim": C, "seq_len": T, "batch": B, "vocab": args.vocab_size, "vocab_padded": Vp,
        "params": n_params, "steps": args.steps, "precision": args.precision,
        "compile": not args.no_compile, "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "",
        "step_ms_median": med * 1e3, "tokens_per_s": B * T / med,
        "peak_mem_bytes": int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else 0,
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(dev)) if dev.type == "cuda" else 0,
        "warmup_s": warm_s, "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None, "data": data_desc,
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
