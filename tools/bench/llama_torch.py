#!/usr/bin/env python3
"""Llama-shape model in PyTorch/transformers: the baseline `llmtrain --model CONFIG.json --device cuda`
is measured against on the GPU (issue 30 item 5; tests/gpu/run.sh step 10b).

transformers' LlamaForCausalLM built from the same config.json llmtrain is given (so the two
train the same architecture and parameter count), SDPA attention (flash on the GPU),
bf16 autocast over fp32 weights (as llmtrain's bf16: fp32 master weights, bf16 compute),
torch.compile, fused AdamW (betas 0.9/0.95, weight decay 0.1 on matrices), gradient clipping
at 1.0, the same micro-batch (rows x seq-len) and number of timed steps.

Data, device set-up, optimizer, timed loop and the JSON line's common fields: tools/bench/torch_bench_common.py,
shared with nanogpt_torch.py (the shard set through tools/python's reader when --data is given and usable,
else random tokens; throughput does not depend on the values).

Output: one JSON line on stdout (everything else on stderr), with tokens_per_s, step_ms_median,
params, flops_per_token (6 N + 6 L T d: the matmul FLOPs of forward + backward, N without
the embedding when it is tied, attention's QK^T and PV counted at full T x T as PaLM's MFU
does) and mfu against --peak-tflops (989: H100/H200 SXM dense bf16).

  python3 tools/bench/llama_torch.py --config CONFIG.json --seq-len 1024 --batch 8 --steps 10
  python3 tools/bench/llama_torch.py --check     # imports + 2 steps of a tiny Llama on the CPU

CPU comparison (issue 30 item 5): --vs-c BUILD/tests/bench_llama_cpu_step times forward + backward
(no optimizer: what bench_llama_cpu_step times) of transformers' fp32 LlamaForCausalLM (SDPA, no
autocast, no compile, torch.set_num_threads(--threads)) and of the C model at the same threads
(OMP_NUM_THREADS), same shape (--layers --heads --kv-heads --dim --ffn --vocab, tied), batch and
sequence length, in --rounds alternating rounds of --steps timed steps each (so both see the same
machine load), and prints one JSON line with each round's medians (wall and CPU time, user + sys of
all threads) and the median ratio C / torch with its range (below 1: the C model is faster).

  python3 tools/bench/llama_torch.py --vs-c build/tests/bench_llama_cpu_step --threads 2 \
      --batch 2 --seq-len 256 --steps 3 --rounds 3
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch_bench_common as tbc  # what this baseline shares with nanogpt_torch.py
from torch_bench_common import log


# The tiny config of --check: GQA (4 heads over 2 KV heads), untied, Llama 3 rope scaling.
TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 176,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
    "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="", help="a LlamaForCausalLM config.json (the one llmtrain trains)")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8, help="rows per micro-batch")
    p.add_argument("--steps", type=int, default=10, help="timed optimiser steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compile happens here)")
    p.add_argument("--data", default="", help="shard set directory (numpy reader in tools/python)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--vs-c", default="", metavar="BENCH",
                   help="CPU fp32 forward+backward against this bench_llama_cpu_step binary (see above)")
    p.add_argument("--threads", type=int, default=2, help="--vs-c: torch threads and OMP_NUM_THREADS")
    p.add_argument("--rounds", type=int, default=3, help="--vs-c: alternating rounds")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--ffn", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--check", action="store_true",
                   help="dry check: imports, model build, 2 steps of a tiny Llama on the CPU, no compile")
    return p.parse_args(argv)


def flops_per_token(cfg, n_params, T):
    """6 N + 6 L T d (torch_bench_common.flops_per_token), N = parameters less an untied input embedding
    (its lookup is not a matmul; the logits matmul through a tied matrix is counted once, as lm_head)."""
    n = n_params
    if not cfg.get("tie_word_embeddings", True):
        n -= cfg["vocab_size"] * cfg["hidden_size"]  # the input embedding is a lookup; lm_head stays
    return tbc.flops_per_token(n, cfg["num_hidden_layers"], T, cfg["hidden_size"])


def vs_c(args):
    """fp32 CPU forward + backward: transformers vs the C model, alternating rounds; the ratio C / torch."""
    import subprocess

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    B, T, V = args.batch, args.seq_len, args.vocab
    conf = LlamaConfig(hidden_size=args.dim, intermediate_size=args.ffn, num_hidden_layers=args.layers,
                       num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, vocab_size=V,
                       max_position_embeddings=T, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                       attn_implementation="sdpa")
    model = LlamaForCausalLM(conf).float()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    x = torch.randint(0, V, (B, T), dtype=torch.int64)
    y = torch.randint(0, V, (B, T), dtype=torch.int64)

    def torch_step():
        """(wall s, CPU s of this process: user + sys over all its threads)"""
        t, c = time.perf_counter(), time.process_time()
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), y.reshape(-1))
        loss.backward()  # gradients accumulate, as the C bench's do
        return time.perf_counter() - t, time.process_time() - c

    torch_step()  # warm-up (allocations, oneDNN primitives)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cmd = [args.vs_c] + [str(v) for v in (args.layers, args.heads, args.kv_heads, args.dim, args.ffn, V, B, T,
                                          args.steps)]
    rounds = []
    for r in range(args.rounds):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        c = json.loads(out.strip().splitlines()[-1])
        ts = [torch_step() for _ in range(args.steps)]
        tt = statistics.median(w for w, _ in ts)
        tc = statistics.median(c_ for _, c_ in ts)
        rounds.append({"c_s": c["step_s_median"], "torch_s": tt, "ratio": c["step_s_median"] / tt,
                       "c_cpu_s": c["step_cpu_s_median"], "torch_cpu_s": tc, "cpu_ratio": c["step_cpu_s_median"] / tc})
        log(f"round {r + 1}: C {c['step_s_median']:.3f} s (CPU {c['step_cpu_s_median']:.3f}), torch {tt:.3f} s "
            f"(CPU {tc:.3f}), ratio wall {rounds[-1]['ratio']:.3f} CPU {rounds[-1]['cpu_ratio']:.3f}")
        if c["params"] != n_params:
            log(f"parameter counts differ: C {c['params']}, torch {n_params}")
            return 2
    out = {"impl": "llama-cpu-vs-torch", "torch": torch.__version__, "threads": args.threads, "batch": B,
           "seq_len": T, "params": n_params, "steps_per_round": args.steps, "rounds": rounds,
           "c_step_s_median": statistics.median(r["c_s"] for r in rounds),
           "torch_step_s_median": statistics.median(r["torch_s"] for r in rounds),
           "ratio_median": statistics.median(r["ratio"] for r in rounds),
           "cpu_ratio_median": statistics.median(r["cpu_ratio"] for r in rounds),
           "ratio_range": [min(r["ratio"] for r in rounds), max(r["ratio"] for r in rounds)],
           "cpu_ratio_range": [min(r["cpu_ratio"] for r in rounds), max(r["cpu_ratio"] for r in rounds)]}
    print(json.dumps(out), flush=True)
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.vs_c:
        return vs_c(args)
    if args.check:
        args.seq_len, args.batch, args.steps, args.warmup = 32, 2, 2, 0
        args.device, args.no_compile = "cpu", True
    elif not args.config:
        print(json.dumps({"impl": "torch-llama", "error": "--config CONFIG.json is required (or --check)"}))
        return 64
    try:
        import numpy as np
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(json.dumps({"impl": "torch-llama", "error": f"import failed: {e}"}))
        return 2
    cfg = dict(TINY) if args.check else json.load(open(args.config))
    dev = tbc.device(torch, args.device, args.seed, "torch-llama")
    if dev is None:
        return 2
    T, B = args.seq_len, args.batch
    conf = LlamaConfig(attn_implementation="sdpa",
                       **{k: v for k, v in cfg.items() if k not in ("architectures", "model_type")})
    model = LlamaForCausalLM(conf).to(dev)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())  # tied: counted once
    V = conf.vocab_size
    opt = tbc.adamw(torch, model, args.lr, dev)
    step_model = model if args.no_compile else torch.compile(model)

    rows, data_desc = tbc.open_reader(args.data, T)
    next_batch = tbc.batches(torch, np, rows, B, T, V, dev, ignore=-100)  # transformers' ignore index
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=True)

    def one_step():
        xb, yb = next_batch()
        with amp:
            logits = step_model(input_ids=xb).logits
        # targets already shifted: the loss over next tokens, in fp32 (llmtrain's too)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), yb.reshape(-1), ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times, losses, warm_s = tbc.timed(torch, dev, one_step, args.warmup, args.steps, cuda_events=False)
    fpt = flops_per_token(cfg, n_params, T)
    head = {
        "impl": "torch-llama", "torch": torch.__version__, "layers": conf.num_hidden_layers,
        "heads": conf.num_attention_heads, "kv_heads": conf.num_key_value_heads, "dim": conf.hidden_size,
        "ffn": conf.intermediate_size, "vocab": V, "tied": bool(conf.tie_word_embeddings), "seq_len": T, "batch": B,
        "params": n_params, "steps": args.steps, "attn": "sdpa", "compile": not args.no_compile,
    }

    def mfu(tps):  # against --peak-tflops, on the GPU only
        return {"flops_per_token": fpt,
                "mfu": tps * fpt / (args.peak_tflops * 1e12) if dev.type == "cuda" else None}

    print(json.dumps(tbc.result(torch, head, dev, B, T, times, losses, warm_s, data_desc, mfu)), flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
