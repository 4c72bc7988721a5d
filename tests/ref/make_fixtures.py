#!/usr/bin/env python3
"""Write the PyTorch reference fixtures for tests/test_model_ref.c.

Builds the tiny GPT-2 of train/model.h (same parameter layout: llm.c
ParameterTensors order, wte padded to a multiple of 128 and tied to the
output projection, padded logit columns excluded) directly from tensors,
generates the initial parameters from a fixed seed, and writes

    tests/data/ref/gpt2_tiny_ref.bin   tensors (format below)
    tests/data/ref/index.json          human-readable index of the same

Fixture cases, each for the plain causal mask and the document mask:
  * one micro-batch: logits, loss sum / target count, every parameter
    gradient of fwd_bwd with grad_scale = 1/n_targets;
  * 10 AdamW steps (lr 3e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on
    2-D weights only, clip 1.0), each over 2 micro-batches with uneven
    target counts (targets = -1 in places): the step gradient is
    d(sum of token losses of the step / target tokens of the step).
    Recorded: step losses, pre-clip grad norms, final parameters (plain).

The reference runs in float64 (--dtype float32 to compare torch fp32) and
stores float32, so the C fp32 result is compared with the exact value.

Binary format (little-endian): magic "MKSREF01", u32 count, then per tensor:
u32 name_len, name bytes, u32 dtype (0 f32, 1 i32, 2 u32), u32 ndim,
u32 dims[ndim], raw data.

Usage: python3 tests/ref/make_fixtures.py [--out DIR] [--dtype float64]
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

L, NH, C, MAXT, V = 2, 2, 64, 32, 100
VP = (V + 127) // 128 * 128
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
SHAPES = [(VP, C), (MAXT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C),
          (L, C, C), (L, C), (L, C), (L, C), (L, 4 * C, C), (L, 4 * C),
          (L, C, 4 * C), (L, C), (C,), (C,)]
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
B, T = 2, 16          # micro-batch
STEPS, MICRO = 10, 2  # AdamW steps, micro-batches per step
LR, BETAS, EPS, WD, CLIP = 3e-3, (0.9, 0.95), 1e-8, 0.1, 1.0


def init_params(gen, dtype):
    std = 0.05
    p = {}
    for name, shape in zip(NAMES, SHAPES):
        t = torch.zeros(shape, dtype=torch.float64)
        if name in ("attprojw", "fcprojw"):
            t.normal_(0.0, std / math.sqrt(2 * L), generator=gen)
        elif name in DECAY:
            t.normal_(0.0, std, generator=gen)
        elif name.startswith("ln") and name.endswith("w"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:  # biases: small non-zero so every path is exercised
            t.normal_(0.0, 0.02, generator=gen)
        if name == "wte":
            t[V:] = 0.0
        # round to fp32 so C and torch start from identical values
        p[name] = t.float().to(dtype)
    return p


def forward(p, inputs, targets, pos, doc):
    """Returns (logits (B,T,VP), per-token losses (B,T) with 0 where no target)."""
    Bn, Tn = inputs.shape
    hs = C // NH
    x = p["wte"][inputs] + p["wpe"][pos]
    causal = torch.tril(torch.ones(Tn, Tn, dtype=torch.bool))
    if doc is not None:
        mask = causal[None] & (doc[:, :, None] == doc[:, None, :])
    else:
        mask = causal[None].expand(Bn, Tn, Tn)
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = h @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(Bn, Tn, NH, hs).transpose(1, 2)
        k = k.view(Bn, Tn, NH, hs).transpose(1, 2)
        v = v.view(Bn, Tn, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask[:, None], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bn, Tn, C)
        x = x + y @ p["attprojw"][l].T + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].T + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = x @ p["wte"].T
    pad = torch.zeros(VP, dtype=torch.bool)
    pad[V:] = True
    masked = logits.masked_fill(pad, float("-inf"))
    tg = targets.clone()
    tg[tg < 0] = -100
    losses = F.cross_entropy(masked.reshape(-1, VP), tg.reshape(-1),
                             ignore_index=-100, reduction="none").view(Bn, Tn)
    return logits, losses


def make_batch(gen, use_doc, p_ignore):
    inputs = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    ign = torch.rand((B, T), generator=gen, dtype=torch.float64) < p_ignore
    targets[ign] = -1
    if use_doc:
        doc = torch.zeros((B, T), dtype=torch.int64)
        pos = torch.zeros((B, T), dtype=torch.int64)
        for b in range(B):
            d, start = b * 100, 0
            for t in range(T):
                if t > 0 and torch.rand((), generator=gen, dtype=torch.float64).item() < 0.2:
                    d, start = d + 1, t
                doc[b, t], pos[b, t] = d, t - start
    else:
        doc = None
        pos = torch.arange(T).expand(B, T).clone()
    return inputs, targets, pos, doc


class Writer:
    def __init__(self):
        self.items = []

    def add(self, name, t, dtype):
        t = torch.as_tensor(t).detach().cpu().contiguous()
        code = {"f32": 0, "i32": 1, "u32": 2}[dtype]
        tt = {"f32": torch.float32, "i32": torch.int32, "u32": torch.int64}[dtype]
        arr = t.to(tt)
        if dtype == "u32":
            data = struct.pack("<%dI" % arr.numel(), *arr.reshape(-1).tolist())
        elif dtype == "i32":
            data = struct.pack("<%di" % arr.numel(), *arr.reshape(-1).tolist())
        else:
            data = struct.pack("<%df" % arr.numel(), *arr.reshape(-1).tolist())
        self.items.append((name, code, list(t.shape), data))

    def save(self, d):
        os.makedirs(d, exist_ok=True)
        index = []
        with open(os.path.join(d, "gpt2_tiny_ref.bin"), "wb") as f:
            f.write(b"MKSREF01")
            f.write(struct.pack("<I", len(self.items)))
            for name, code, shape, data in self.items:
                nb = name.encode()
                f.write(struct.pack("<I", len(nb)) + nb)
                f.write(struct.pack("<II", code, len(shape)))
                f.write(struct.pack("<%dI" % len(shape), *shape))
                f.write(data)
                index.append({"name": name, "dtype": ["f32", "i32", "u32"][code],
                              "shape": shape})
        with open(os.path.join(d, "index.json"), "w") as f:
            json.dump({"config": {"n_layer": L, "n_head": NH, "d_model": C,
                                  "max_seq": MAXT, "vocab": V, "vocab_padded": VP},
                       "micro_batch": [B, T], "steps": STEPS, "micro": MICRO,
                       "adamw": {"lr": LR, "beta1": BETAS[0], "beta2": BETAS[1],
                                 "eps": EPS, "weight_decay": WD, "clip": CLIP},
                       "tensors": index}, f, indent=1)


def flat(ts):
    return torch.cat([t.reshape(-1) for t in ts])


def run_case(w, tag, p0, gen, use_doc, dtype):
    # single micro-batch: logits, loss, gradients with grad_scale = 1/n
    inputs, targets, pos, doc = make_batch(gen, use_doc, 0.25)
    p = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    logits, losses = forward(p, inputs, targets, pos, doc)
    n = int((targets >= 0).sum())
    loss_sum = losses.sum()
    (loss_sum / n).backward()
    w.add(tag + "/inputs", inputs, "u32")
    w.add(tag + "/targets", targets, "i32")
    w.add(tag + "/pos", pos, "i32")
    if doc is not None:
        w.add(tag + "/doc", doc, "i32")
    w.add(tag + "/logits", logits.float(), "f32")
    w.add(tag + "/loss", torch.tensor([loss_sum.item(), n]), "f32")
    w.add(tag + "/grads", flat([p[k].grad for k in NAMES]).float(), "f32")
    print("%s: loss %.6f over %d targets" % (tag, loss_sum.item() / n, n))

    # 10 AdamW steps x 2 micro-batches, uneven target counts
    p = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    groups = [{"params": [p[k] for k in NAMES if k in DECAY], "weight_decay": WD},
              {"params": [p[k] for k in NAMES if k not in DECAY], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS, foreach=False)
    step_losses, norms, batches = [], [], []
    for s in range(STEPS):
        mbs = [make_batch(gen, use_doc, 0.5 if k == 0 else 0.1) for k in range(MICRO)]
        ntok = sum(int((mb[1] >= 0).sum()) for mb in mbs)
        opt.zero_grad()
        tot = 0.0
        for inputs, targets, pos, doc in mbs:
            _, losses = forward(p, inputs, targets, pos, doc)
            (losses.sum() / ntok).backward()
            tot += losses.sum().item()
        norm = torch.nn.utils.clip_grad_norm_([p[k] for k in NAMES], CLIP)
        opt.step()
        step_losses.append(tot / ntok)
        norms.append(norm.item())
        batches.extend(mbs)
    w.add(tag + "/train_inputs", torch.stack([b[0] for b in batches]), "u32")
    w.add(tag + "/train_targets", torch.stack([b[1] for b in batches]), "i32")
    w.add(tag + "/train_pos", torch.stack([b[2] for b in batches]), "i32")
    if use_doc:
        w.add(tag + "/train_doc", torch.stack([b[3] for b in batches]), "i32")
    w.add(tag + "/train_losses", torch.tensor(step_losses), "f32")
    w.add(tag + "/train_norms", torch.tensor(norms), "f32")
    if not use_doc:
        w.add(tag + "/train_final_params", flat([p[k] for k in NAMES]).detach().float(), "f32")
    print("%s: step losses %s" % (tag, " ".join("%.5f" % x for x in step_losses)))
    print("%s: grad norms  %s" % (tag, " ".join("%.4f" % x for x in norms)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "data", "ref"))
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    torch.set_default_dtype(dtype)
    gen = torch.Generator().manual_seed(1234)
    p0 = init_params(gen, dtype)
    w = Writer()
    w.add("config", torch.tensor([L, NH, C, MAXT, V, VP]), "i32")
    w.add("params0", flat([p0[k] for k in NAMES]).float(), "f32")
    run_case(w, "plain", p0, gen, False, dtype)
    run_case(w, "doc", p0, gen, True, dtype)
    w.save(os.path.normpath(a.out))


if __name__ == "__main__":
    main()
