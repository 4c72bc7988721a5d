#!/usr/bin/env python3
"""tests/data/hf/llama_model.json: small random-init transformers models in
fp32 (every parameter perturbed: norms too) with their logits, loss and
every parameter's gradient on fixed rows, for tests/test_llama_model.c (the
CPU reference Llama forward/backward, train/llama_model.c; CI needs no torch).

  llama_gqa_untied   LlamaForCausalLM: 4 heads, 2 KV heads, untied lm_head
  llama3_rope        LlamaForCausalLM: Llama 3.1 rope_scaling (llama3), tied
  qwen2_bias         Qwen2ForCausalLM: q/k/v biases, GQA, tied
  llama_doc_mask     the first with --doc-mask: document ids, positions
                     restarting per document (transformers: each document
                     run as its own sequence)

Run: python3 tests/hf/make_llama_model_fixture.py (needs torch, transformers)."""
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "hf", "llama_model.json")
DIMS = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)


def rope(theta, llama3=False):
    p = {"rope_type": "llama3" if llama3 else "default", "rope_theta": theta}
    if llama3:
        p.update(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=32)
    return p


def case(cls, cfg_cls, seed, tied, theta, llama3=False, **extra):
    torch.manual_seed(seed)
    cfg = cfg_cls(**DIMS, tie_word_embeddings=tied, rope_parameters=rope(theta, llama3), **extra)
    cfg._attn_implementation = "eager"
    m = cls(cfg).float().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    rows = torch.randint(0, DIMS["vocab_size"], (2, 13), generator=torch.Generator().manual_seed(seed + 1))
    inputs, targets = rows[:, :-1], rows[:, 1:].clone()
    targets[1, 3] = -100  # one position without loss
    logits = m(inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, DIMS["vocab_size"]), targets.reshape(-1),
                                             ignore_index=-100)
    loss.backward()
    flat = lambda t: [float(v) for v in t.detach().reshape(-1).tolist()]
    params = {n: flat(p) for n, p in m.named_parameters()}
    grads = {n: flat(p.grad) for n, p in m.named_parameters()}
    return {"config": {**DIMS, "tied": tied, "theta": theta, "llama3": llama3,
                       "qkv_bias": bool(extra.get("qkv_bias", False)) or cls is Qwen2ForCausalLM},
            "inputs": inputs.tolist(), "targets": [[-1 if t < 0 else t for t in r] for r in targets.tolist()],
            "loss": loss.item(), "logits": flat(logits), "params": params, "grads": grads}


def doc_case(seed):
    """--doc-mask: each document of a row attends only within itself and its
    positions restart at 0, i.e. transformers runs every document as its own
    sequence; the loss is the mean over all rows' targets."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(**DIMS, tie_word_embeddings=False, rope_parameters=rope(10000.0))
    cfg._attn_implementation = "eager"
    m = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    T = 12
    rows = torch.randint(0, DIMS["vocab_size"], (2, T + 1), generator=torch.Generator().manual_seed(seed + 1))
    inputs, targets = rows[:, :-1], rows[:, 1:].clone()
    docs = [[0] * 5 + [1] * 7, [0] * 3 + [1] * 4 + [2] * 5]
    pos = [[t - d.index(d[t]) for t in range(T)] for d in docs]
    logits = torch.zeros(2, T, DIMS["vocab_size"])
    for b in range(2):
        for k in sorted(set(docs[b])):
            idx = [t for t in range(T) if docs[b][t] == k]
            logits[b, idx] = m(inputs[b:b + 1, idx]).logits[0]
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, DIMS["vocab_size"]), targets.reshape(-1))
    loss.backward()
    flat = lambda t: [float(v) for v in t.detach().reshape(-1).tolist()]
    return {"config": {**DIMS, "tied": False, "theta": 10000.0, "llama3": False, "qkv_bias": False},
            "inputs": inputs.tolist(), "targets": targets.tolist(), "doc": docs, "pos": pos, "loss": loss.item(),
            "logits": flat(logits), "params": {n: flat(p) for n, p in m.named_parameters()},
            "grads": {n: flat(p.grad) for n, p in m.named_parameters()}}


out = {"llama_gqa_untied": case(LlamaForCausalLM, LlamaConfig, 40, False, 10000.0),
       "llama3_rope": case(LlamaForCausalLM, LlamaConfig, 41, True, 500000.0, llama3=True),
       "qwen2_bias": case(Qwen2ForCausalLM, Qwen2Config, 42, True, 1000000.0),
       "llama_doc_mask": doc_case(43),
       "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__}}
with open(OUT, "w") as f:
    json.dump(out, f)
    f.write("\n")
print("wrote", OUT, {k: (v["loss"], len(v["params"])) for k, v in out.items() if k != "versions"})
