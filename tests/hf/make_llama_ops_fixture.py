#!/usr/bin/env python3
"""tests/data/hf/llama_ops.json: inputs, outputs and gradients of
transformers' fp32 Llama ops, for tests/test_kn_llama.c (the C references in
kernels/llama_ref.c; CI needs no torch).

  RMSNorm   LlamaRMSNorm (eps 1e-5), forward and autograd gradients
  RoPE      LlamaRotaryEmbedding's inv_freq (default rope, theta 10000;
            Llama 3.1's rope_scaling: llama3, theta 500000, factor 8, low 1,
            high 4, original 8192) and apply_rotary_pos_emb at positions up
            to 8000, forward and gradient
  SwiGLU    silu(gate) * up, forward and gradients

Run: python3 tests/hf/make_llama_ops_fixture.py (needs torch, transformers)."""
import json
import os

import torch
from transformers import LlamaConfig
from transformers.models.llama import modeling_llama as ml

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "hf", "llama_ops.json")
g = torch.Generator().manual_seed(30)


def rnd(*shape):
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


out = {}
# RMSNorm
N, C = 5, 24
x, w, dy = rnd(N, C) * 2, rnd(C), rnd(N, C)
norm = ml.LlamaRMSNorm(C, eps=1e-5)
with torch.no_grad():
    norm.weight.copy_(w)
xr = x.clone().requires_grad_(True)
y = norm(xr)
y.backward(dy)
out["rmsnorm"] = {"N": N, "C": C, "eps": 1e-5, "x": flat(x), "w": flat(w), "dy": flat(dy), "y": flat(y),
                  "dx": flat(xr.grad), "dw": flat(norm.weight.grad)}


def rope_case(name, head_dim, theta, scaling, pos):
    H = 2
    kw = dict(hidden_size=head_dim * H, num_attention_heads=H, num_key_value_heads=H, head_dim=head_dim,
              max_position_embeddings=16384)
    params = {"rope_type": "llama3" if scaling else "default", "rope_theta": theta}
    if scaling:
        params.update(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192)
    try:
        cfg = LlamaConfig(rope_parameters=params, **kw)
    except TypeError:
        cfg = LlamaConfig(rope_theta=theta, rope_scaling=({k: v for k, v in params.items() if k != "rope_theta"}
                                                          if scaling else None), **kw)
    rot = ml.LlamaRotaryEmbedding(cfg)
    T = len(pos)
    xq = rnd(1, H, T, head_dim)
    dq = rnd(1, H, T, head_dim)
    position_ids = torch.tensor([pos])
    cos, sin = rot(xq, position_ids)
    xr = xq.clone().requires_grad_(True)
    q, _ = ml.apply_rotary_pos_emb(xr, xr.detach().clone(), cos, sin)
    q.backward(dq)
    # our layout: (N = T, heads, head_dim)
    to_ours = lambda t: t[0].permute(1, 0, 2).contiguous()
    out[name] = {"head_dim": head_dim, "heads": H, "theta": theta, "llama3": bool(scaling), "pos": pos,
                 "inv_freq": flat(rot.inv_freq), "attention_scaling": float(rot.attention_scaling),
                 "x": flat(to_ours(xq)), "dy": flat(to_ours(dq)), "y": flat(to_ours(q)),
                 "dx": flat(to_ours(xr.grad))}


rope_case("rope_default", 16, 10000.0, False, [0, 1, 5, 37])
rope_case("rope_llama3", 64, 500000.0, True, [0, 1, 37, 1000, 8000])
# SwiGLU
n = 64
gate, up, dy = rnd(n) * 3, rnd(n), rnd(n)
gr, ur = gate.clone().requires_grad_(True), up.clone().requires_grad_(True)
y = torch.nn.functional.silu(gr) * ur
y.backward(dy)
out["swiglu"] = {"n": n, "gate": flat(gate), "up": flat(up), "dy": flat(dy), "y": flat(y), "dgate": flat(gr.grad),
                 "dup": flat(ur.grad)}
out["versions"] = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
with open(OUT, "w") as f:
    json.dump(out, f)
    f.write("\n")
print("wrote", OUT)
