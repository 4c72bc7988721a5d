#!/usr/bin/env python3
"""nanoGPT-style GPT-2 in PyTorch: the baseline that `llmtrain --device cuda` is measured against.

Same architecture as train/ (learned positions, pre-LayerNorm, GELU tanh, tied embeddings,
biases everywhere, vocabulary padded to a multiple of 128 with the padding never predicted),
bf16 autocast, F.scaled_dot_product_attention (flash on the GPU), torch.compile, fused AdamW,
the same micro-batch (rows x seq-len), same number of steps.

Data: the shard set of `--data DIR` through the numpy reader in tools/python/ when one is
there (see torch_bench_common.open_reader for what it looks for); otherwise random tokens, and the JSON line
says so ("data": "random: ..."). Throughput does not depend on the token values.

--doc-mask: the row `llmtrain --doc-mask` trains: positions restart at each document (the shard rows'
pos_ids into the position table) and attention stays inside documents (causal and same-document). The
attention is torch's flex attention (a BlockMask built each step from the batch's document ids, compiled
with the model: blocks that cross no boundary run unmasked, blocks of other documents are skipped), the
fast baseline; `--attn sdpa-mask` runs SDPA with the equivalent dense boolean mask instead (the check).
Without --data the rows are random documents (torch_bench_common.RANDOM_DOCS; "data" says so).

Output: one JSON line on stdout (everything else goes to stderr):
  {"impl": "torch", "tokens_per_s": ..., "peak_mem_bytes": ..., "step_ms_median": ..., ...}

  python3 tools/bench/nanogpt_torch.py --model d12 --seq-len 1024 --batch 16 --steps 30
  python3 tools/bench/nanogpt_torch.py --check     # imports + a 2-step tiny run on the CPU
  python3 tools/bench/nanogpt_torch.py --model d12 --seq-len 4096 --batch 8 --doc-mask --data DIR
  python3 tools/bench/nanogpt_torch.py --check-doc-mask   # flex == dense-mask SDPA (== plain causal
                                                          # with one document a row), fp32 on the CPU
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
    p.add_argument("--doc-mask", action="store_true",
                   help="as llmtrain --doc-mask: positions restart at each document, attention stays inside it")
    p.add_argument("--attn", default="flex", choices=["flex", "sdpa-mask"],
                   help="with --doc-mask: flex attention with a BlockMask (default) or SDPA with the dense mask")
    p.add_argument("--check-doc-mask", action="store_true",
                   help="CPU, fp32, tiny model: loss and gradients of flex == dense-mask SDPA (1e-5), both == "
                        "plain causal with one document a row; then 2 --doc-mask steps (--data: its rows too)")
    return p.parse_args(argv)


def build_model(torch, nn, F, n_layer, n_head, n_embd, vocab_padded, vocab_real, seq_len, flex=None):
    """flex: torch's flex_attention, needed only when forward() gets a BlockMask."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.mlp_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x, mask=None):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            if mask is None:  # causal: flash SDPA on the GPU
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            elif isinstance(mask, torch.Tensor):  # (B, 1, T, T) bool, True = attend
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:  # a BlockMask: causal and same-document
                y = flex(q, k, v, block_mask=mask)
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

        def forward(self, idx, targets, pos=None, mask=None):
            """pos: (B, T) positions (restarting per document) or None for 0..T-1; mask: None (causal),
            a (B, 1, T, T) boolean mask or a BlockMask."""
            B, T = idx.shape
            if pos is None:
                pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x, mask)
            x = self.ln_f(x)
            logits = F.linear(x, self.wte.weight)  # tied embeddings
            # the padding of the vocabulary is never predicted
            logits = logits[..., :vocab_real]
            return F.cross_entropy(logits.float().reshape(-1, vocab_real), targets.reshape(-1),
                                   ignore_index=-1)

    return GPT()


def doc_mask_fn(torch, flex_mod, attn, B, T, dev, compile_mask):
    """make(doc) -> the attention mask of a batch whose document ids are doc (B, T): causal and
    same-document. attn "flex": a BlockMask (created each step from the ids copied into one device buffer,
    so the mask function is the same object every step and the compiled model is not traced again);
    "sdpa-mask": the dense (B, 1, T, T) boolean mask, True = attend."""
    if attn == "sdpa-mask":
        causal = torch.ones(T, T, dtype=torch.bool, device=dev).tril()

        def make_dense(doc):
            return (causal & (doc[:, :, None] == doc[:, None, :])).unsqueeze(1)

        return make_dense
    doc_buf = torch.zeros(B, T, dtype=torch.int64, device=dev)

    def same_doc_causal(b, h, q, kv):
        return (q >= kv) & (doc_buf[b, q] == doc_buf[b, kv])

    def make_flex(doc):
        doc_buf.copy_(doc)
        return flex_mod.create_block_mask(same_doc_causal, B, None, T, T, device=dev, _compile=compile_mask)

    return make_flex


def block_mask_errors(torch, bm, dense):
    """How many (row, query block, key block) entries of the BlockMask bm disagree with the element mask
    dense (B, T, T): a block listed full must allow every pair (and not be listed partial too), one listed
    partial some pair, one not listed none. This is what the compiled flex kernel reads (full blocks run
    without the mask function, unlisted ones are skipped); the eager CPU path evaluates the mask function
    over everything and never reads it. Vectorised: runs on the GPU on a T=4096 batch in milliseconds."""
    B, T, _ = dense.shape
    bq, bk = bm.BLOCK_SIZE
    nq, nk = -(-T // bq), -(-T // bk)

    def blocks(fill):  # (B, nq, bq, nk, bk), the positions past T filled with `fill`
        x = torch.full((B, nq * bq, nk * bk), fill, dtype=torch.bool, device=dense.device)
        x[:, :T, :T] = dense
        return x.view(B, nq, bq, nk, bk)

    any_ = blocks(False).any(dim=4).any(dim=2)
    all_ = blocks(True).all(dim=4).all(dim=2)

    def listed(num, idx):  # (B, 1, nq) counts + (B, 1, nq, nk) indices -> (B, nq, nk) bool
        if num is None:
            return torch.zeros(B, nq, nk, dtype=torch.bool, device=dense.device)
        num, idx = num[:, 0, :nq].to(dense.device), idx[:, 0, :nq, :nk].to(dense.device).long()
        valid = torch.arange(idx.shape[-1], device=dense.device)[None, None, :] < num[..., None]
        cnt = torch.zeros(B, nq, nk, dtype=torch.int32, device=dense.device)
        cnt.scatter_add_(2, torch.where(valid, idx, torch.zeros_like(idx)), valid.int())
        return cnt > 0

    part = listed(bm.kv_num_blocks, bm.kv_indices)
    full = listed(bm.full_kv_num_blocks, bm.full_kv_indices)
    bad = (full & ~all_) | (full & part) | (part & ~any_) | (~part & ~full & any_)
    return int(bad.sum())


def check_doc_mask(args, torch, nn, F, np, flex_mod):
    """--check-doc-mask: on the CPU in fp32 with the tiny model, the loss and every gradient of the flex
    path equal the dense-mask SDPA path's (max abs difference <= 1e-5) on rows of random documents; with
    one document a row (positions 0..T-1, one id) both equal the plain causal path; the mask changes the
    loss (else the check would pass with the mask ignored); the BlockMask's full / partial / skipped blocks
    agree with the element mask (block_mask_errors). With --data, the same on the shards' rows, and the
    reader's doc_ids make the partition llmtrain derives from the positions. Returns (ok, fields).

    Flex attention's backward on the CPU: torch refuses it (a device check in flex_attention); its eager
    reference implementation (the one the CPU forward runs) has a device-independent backward, so when the
    refusal comes the check lifts it for itself and says so ("flex_cpu_backward")."""
    tol = 1e-5
    dev = torch.device("cpu")
    torch.manual_seed(args.seed)
    L, H, C = PRESETS["tiny"]
    B, T = 3, 256  # two 128-token blocks a row: the BlockMask has full, partial and empty blocks
    rows, data_desc = (None, "random") if not args.data else tbc.open_reader(args.data, T)
    V = 512 if rows is None else args.data_vocab
    Vp = (V + 127) // 128 * 128
    model = build_model(torch, nn, F, L, H, C, Vp, V, T, flex=flex_mod.flex_attention).to(dev)
    out, ok = {"check": "doc-mask", "tolerance": tol}, True

    def run(xb, yb, pos=None, mask=None):
        model.zero_grad(set_to_none=True)
        try:
            loss = model(xb, yb, pos, mask)
        except NotImplementedError as e:
            if "backward on CPU" not in str(e) or out.get("flex_cpu_backward"):
                raise
            flex_mod._validate_device = lambda *a, **k: None
            out["flex_cpu_backward"] = "torch refuses it; its eager reference run with the refusal lifted"
            loss = model(xb, yb, pos, mask)
        loss.backward()
        return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    def diff(a, b):
        d = float((a[0] - b[0]).abs())
        for n in a[1]:
            d = max(d, float((a[1][n] - b[1][n]).abs().max()))
        return d

    sets = [("random", tbc.batches(torch, np, None, B, T, V, dev, ignore=-1, doc_mask=True, seed=args.seed))]
    if rows is not None:
        sets.append(("shards", tbc.batches(torch, np, rows, B, T, V, dev, ignore=-1, doc_mask=True)))
        # the reader's own document ids (the first T positions) against the ids derived from positions
        bad = 0
        for i in range(len(rows)):
            r = rows[i]
            d0 = np.asarray(r[3][:T], dtype=np.int64)
            d1 = tbc.doc_ids_from_pos(np, np.asarray(r[2][:T]))
            bad += int(not np.array_equal(d0 - d0[0], d1))
        out["shard_rows_partition_mismatch"] = bad
        out["shard_docs_per_row"] = round(float(np.mean(
            [tbc.doc_ids_from_pos(np, np.asarray(rows[i][2][:T]))[-1] + 1 for i in range(len(rows))])), 2)
        ok &= bad == 0
    flex_make = doc_mask_fn(torch, flex_mod, "flex", B, T, dev, False)
    dense_make = doc_mask_fn(torch, flex_mod, "sdpa-mask", B, T, dev, False)
    for name, nb in sets:
        xb, yb, pb, db = nb()
        plain = run(xb, yb)
        dense = run(xb, yb, pb, dense_make(db))
        bm = flex_make(db)
        flex = run(xb, yb, pb, bm)
        d_fd = diff(flex, dense)
        nbad = block_mask_errors(torch, bm, dense_make(db)[:, 0])
        out[f"{name}_block_mask_errors"] = nbad
        ok &= nbad == 0
        d_mask = abs(float(dense[0]) - float(plain[0]))
        out[f"{name}_docs_per_row"] = round(float((db[:, -1] + 1).double().mean()), 2)
        out[f"{name}_flex_vs_dense"] = d_fd
        out[f"{name}_mask_changes_loss_by"] = d_mask
        ok &= d_fd <= tol and d_mask > 1e-4
        # one document a row: the plain causal path
        one_pos = torch.arange(T, dtype=torch.int64).expand(B, T).contiguous()
        one_doc = torch.zeros(B, T, dtype=torch.int64)
        d1 = diff(run(xb, yb, one_pos, flex_make(one_doc)), plain)
        d2 = diff(run(xb, yb, one_pos, dense_make(one_doc)), plain)
        out[f"{name}_one_doc_flex_vs_plain"], out[f"{name}_one_doc_dense_vs_plain"] = d1, d2
        ok &= d1 <= tol and d2 <= tol
    out["check_pass"] = bool(ok)
    return ok, out


def main(argv=None):
    args = parse_args(argv)
    args.data_vocab = args.vocab_size  # --check-doc-mask --data: the shards' vocabulary (--vocab-size)
    if args.check or args.check_doc_mask:
        args.model, args.seq_len, args.batch, args.steps, args.warmup = "tiny", 64, 2, 2, 0
        args.device, args.no_compile, args.vocab_size = "cpu", True, 512
        if args.check_doc_mask:
            args.doc_mask, args.seq_len = True, 256
    try:
        import numpy as np
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        print(json.dumps({"impl": "torch", "error": f"import failed: {e}"}))
        return 2
    flex_mod = None
    if args.doc_mask:
        try:
            import torch.nn.attention.flex_attention as flex_mod
        except ImportError as e:
            if args.attn == "flex":
                print(json.dumps({"impl": "torch", "error": f"flex attention unavailable: {e}"}))
                return 2

    checked = {}
    if args.check_doc_mask:
        ok, checked = check_doc_mask(args, torch, nn, F, np, flex_mod)
        data_arg, args.data = args.data, ""  # the 2 steps below: random documents, vocabulary 512
        if not ok:
            print(json.dumps({"impl": "torch", "torch": torch.__version__, **checked, "data_checked": data_arg}))
            return 1

    dev = tbc.device(torch, args.device, args.seed, "torch")
    if dev is None:
        return 2
    if args.doc_mask and args.attn == "flex" and dev.type == "cpu" and not args.check_doc_mask:
        print(json.dumps({"impl": "torch", "error": "flex attention: torch refuses its backward on the CPU "
                                                    "(--check-doc-mask compares it there); --attn sdpa-mask"}))
        return 2

    L, H, C = PRESETS[args.model]
    T, B = args.seq_len, args.batch
    Vp = (args.vocab_size + 127) // 128 * 128
    model = build_model(torch, nn, F, L, H, C, Vp, args.vocab_size, T,
                        flex=flex_mod.flex_attention if flex_mod else None).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = tbc.adamw(torch, model, args.lr, dev)
    step_model = model if args.no_compile else torch.compile(model)

    rows, data_desc = tbc.open_reader(args.data, T)
    next_batch = tbc.batches(torch, np, rows, B, T, args.vocab_size, dev, ignore=-1, doc_mask=args.doc_mask,
                             seed=args.seed)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=(args.precision == "bf16"))
    make_mask = None
    if args.doc_mask:
        # the BlockMask's own construction compiled on the GPU (as the model is), eager on the CPU
        make_mask = doc_mask_fn(torch, flex_mod, args.attn, B, T, dev, dev.type == "cuda" and not args.no_compile)
        if rows is not None:
            n_docs = [int(tbc.doc_ids_from_pos(np, np.asarray(rows[i][2][:T]))[-1]) + 1 for i in range(len(rows))]
            data_desc += (f"; documents: the rows' boundaries (pos_ids), as llmtrain --doc-mask, "
                          f"{sum(n_docs) / len(n_docs):.1f} a row of {T}")
        else:
            data_desc += "; " + tbc.RANDOM_DOCS

    checked_bm = {}
    if make_mask is not None and args.attn == "flex" and not args.check_doc_mask:
        # the BlockMask this run builds (compiled on the GPU) against the element mask, on its first batch:
        # --check-doc-mask checked the construction on the CPU, this the one the timed steps use
        _, _, _, db0 = tbc.batches(torch, np, rows, B, T, args.vocab_size, dev, ignore=-1, doc_mask=True,
                                   seed=args.seed)()
        nbad = block_mask_errors(torch, make_mask(db0),
                                 doc_mask_fn(torch, flex_mod, "sdpa-mask", B, T, dev, False)(db0)[:, 0])
        checked_bm = {"block_mask_errors_first_batch": nbad}
        if nbad:
            print(json.dumps({"impl": "torch", "error": f"flex BlockMask: {nbad} blocks disagree with the "
                                                        "document mask on the first batch", **checked_bm}))
            return 1

    def one_step():
        if make_mask is None:
            xb, yb = next_batch()
            with amp:
                loss = step_model(xb, yb)
        else:  # the mask is built inside the timed step: llmtrain reads its document ids inside its step too
            xb, yb, pb, db = next_batch()
            mask = make_mask(db)
            with amp:
                loss = step_model(xb, yb, pb, mask)
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
    if args.doc_mask:
        head.update({"doc_mask": True, "attention": "flex_attention BlockMask (causal, same document)"
                     if args.attn == "flex" else "SDPA dense boolean mask (causal, same document)"})
    res = tbc.result(torch, head, dev, B, T, times, losses, warm_s, data_desc)
    res.update(checked_bm)
    if args.check_doc_mask:
        res.update(checked)
        res["data_checked"] = data_arg or "random only"
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
