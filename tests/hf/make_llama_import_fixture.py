#!/usr/bin/env python3
"""tests/data/hf/llama_import/: Hugging Face folders written by transformers'
save_pretrained (fp32, small random-init, every parameter perturbed) with
the loss transformers computes on fixed rows, for tests/test_llama_import.c
(tr_llama_import_hf: config.json + safetensors -> train/llama_model.c; CI
needs no torch).

  llama_gqa_llama3   LlamaForCausalLM: 4 heads / 2 KV heads, untied lm_head,
                     rope_type llama3; one model.safetensors
  qwen2_bias_sharded Qwen2ForCausalLM: q/k/v biases, tied; written with
                     max_shard_size 4KB (model.safetensors.index.json)

rows.json: {case: {"inputs", "targets" (-1: no loss), "loss"}}.
Run: /work/venv-model/bin/python tests/hf/make_llama_import_fixture.py"""
import json
import os
import shutil

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "hf", "llama_import")
DIMS = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)


def case(name, cls, cfg_cls, seed, tied, rope, shard=None):
    torch.manual_seed(seed)
    cfg = cfg_cls(**DIMS, tie_word_embeddings=tied, rope_parameters=rope)
    cfg._attn_implementation = "eager"
    m = cls(cfg).float().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    m.save_pretrained(d, **({"max_shard_size": shard} if shard else {}))
    for f in os.listdir(d):  # only what the import reads
        if f not in ("config.json", "model.safetensors", "model.safetensors.index.json") and \
                not f.startswith("model-"):
            os.remove(os.path.join(d, f))
    rows = torch.randint(0, DIMS["vocab_size"], (2, 13), generator=torch.Generator().manual_seed(seed + 1))
    inputs, targets = rows[:, :-1], rows[:, 1:].clone()
    targets[0, 5] = -100
    with torch.no_grad():
        logits = m(inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, DIMS["vocab_size"]), targets.reshape(-1),
                                             ignore_index=-100)
    return {"inputs": inputs.tolist(), "targets": [[-1 if t < 0 else t for t in r] for r in targets.tolist()],
            "loss": loss.item()}


os.makedirs(OUT, exist_ok=True)
llama3 = {"rope_type": "llama3", "rope_theta": 5000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
out = {
    "llama_gqa_llama3": case("llama_gqa_llama3", LlamaForCausalLM, LlamaConfig, 11, False, llama3),
    "qwen2_bias_sharded": case("qwen2_bias_sharded", Qwen2ForCausalLM, Qwen2Config, 12, True,
                               {"rope_type": "default", "rope_theta": 10000.0}, shard="4KB"),
}
with open(os.path.join(OUT, "rows.json"), "w") as f:
    json.dump(out, f, indent=1)
