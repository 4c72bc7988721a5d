#!/usr/bin/env python3
"""Seeds of fuzz_family_config (tests/fuzz_family_config.c): checkpoint model
records (DIR/model.txt, train/family.c's tr_family_config_to_text format) of
llama-tiny with a 512 vocabulary and T=32 (what tests/cli_llmtrain_llama.sh's
runs write), a Qwen2 shape with q/k/v biases and untied head, a Llama 3 rope
scaling, and two broken ones (a field missing, a GPT-2 family id).
Run from the repository root: python3 tests/data/fuzz/make_family_config_seeds.py"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "family_config")
KEYS = ("family", "arch", "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab", "max_seq", "rope_theta",
        "norm_eps", "rope_factor", "rope_low", "rope_high", "rope_orig_max", "tied", "qkv_bias")


def record(vals):
    return "".join(f"{k} {v}\n" for k, v in zip(KEYS, vals))


def hexf(x):
    return float(x).hex().replace("0x1.0000000000000p", "0x1p").rstrip("0").replace(".p", "p")


SEEDS = {
    "llama_tiny.txt": record([1, 0, 2, 4, 2, 64, 128, 512, 32, hexf(10000.0), float.hex(1e-5), "0x0p+0", "0x0p+0",
                              "0x0p+0", 0, 1, 0]),
    "qwen2_bias_untied.txt": record([1, 1, 2, 4, 1, 64, 160, 300, 64, hexf(1000000.0), float.hex(1e-6), "0x0p+0",
                                     "0x0p+0", "0x0p+0", 0, 0, 1]),
    "llama3_rope.txt": record([1, 0, 1, 2, 1, 32, 64, 128, 16, hexf(500000.0), float.hex(1e-5), hexf(32.0),
                               hexf(1.0), hexf(4.0), 8192, 1, 0]),
    "field_missing.txt": record([1, 0, 2, 4, 2, 64, 128, 512, 32])[:-1],
    "gpt2_family.txt": record([0, 0, 2, 2, 2, 64, 256, 512, 32, hexf(10000.0), float.hex(1e-5), "0x0p+0", "0x0p+0",
                               "0x0p+0", 0, 1, 0]),
}

os.makedirs(OUT, exist_ok=True)
for name, text in SEEDS.items():
    with open(os.path.join(OUT, name), "w") as f:
        f.write(text)
print(f"wrote {len(SEEDS)} seeds to {OUT}")
