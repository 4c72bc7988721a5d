#!/usr/bin/env python3
"""Write the PyTorch reference for tests/test_loss_mask_train.c (issue 28
item 3): the tiny GPT-2 of make_fixtures.py trained on rows whose loss mask
excludes about half of the tokens.

Rows (row length ROW = T + 1, one document each, padding after `valid`)
carry a loss bit per token: bit i set means token i is a target (its
prediction from the tokens before it is trained). The C test writes them
into a version-2 shard set through the packer, reads them back through
llmtrain's loader and runs the model; this script computes, from the same
tokens and bits, what the loss and the gradients must be:

    labels[j] = tokens[j + 1] if bit j + 1 is set else -100
    loss      = F.cross_entropy(logits, labels, ignore_index=-100)   (mean over targets)
    grads     = d loss / d params

Row 1 has no target at all (a zero-target row contributes nothing), row 0
has every other token masked out, rows 2 and 3 random bits over shorter
documents. Written to tests/data/ref/loss_mask_ref.bin in the format of
make_fixtures.py (MKSREF01). float64 reference, float32 stored.

Usage: /work/venv-model/bin/python tests/ref/make_loss_mask_fixture.py [--out DIR]
"""
import argparse
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (the tiny model: same layout, init and forward)

T = 16
ROW = T + 1
VALID = [17, 17, 12, 9]
EOT = mf.V - 1  # the pad id of the shards (= EOT)


def make_rows(gen):
    R = len(VALID)
    tok = torch.full((R, ROW), EOT, dtype=torch.int64)
    bits = torch.zeros((R, ROW), dtype=torch.int64)
    for r, nv in enumerate(VALID):
        tok[r, :nv] = torch.randint(0, mf.V - 1, (nv,), generator=gen)
        if r == 0:
            bits[r, :nv] = torch.arange(nv) % 2
        elif r == 1:
            pass  # no target
        else:
            bits[r, :nv] = (torch.rand(nv, generator=gen, dtype=torch.float64) < 0.5).long()
    return tok, bits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ref"))
    a = ap.parse_args()
    torch.set_default_dtype(torch.float64)
    gen = torch.Generator().manual_seed(2028)
    p0 = mf.init_params(gen, torch.float64)
    tok, bits = make_rows(gen)
    inputs = tok[:, :T]
    labels = torch.where(bits[:, 1:] == 1, tok[:, 1:], torch.full_like(tok[:, 1:], -100))
    pos = torch.arange(T).expand(len(VALID), T).clone()
    params = [p0[k].clone().requires_grad_(True) for k in mf.NAMES]
    p = dict(zip(mf.NAMES, params))
    logits, _ = mf.forward(p, inputs, labels.clamp(min=-1), pos, None)
    pad = torch.zeros(mf.VP, dtype=torch.bool)
    pad[mf.V:] = True
    masked = logits.masked_fill(pad, float("-inf"))
    loss = F.cross_entropy(masked.reshape(-1, mf.VP), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    n = int((labels != -100).sum())
    tokens_real = sum(VALID)
    print("loss %.8f over %d targets of %d real tokens (%d label positions)" % (loss.item(), n, tokens_real,
                                                                              labels.numel()))
    w = mf.Writer()
    w.add("config", torch.tensor([mf.L, mf.NH, mf.C, mf.MAXT, mf.V, mf.VP]), "i32")
    w.add("params0", mf.flat([p0[k] for k in mf.NAMES]).float(), "f32")
    w.add("row_tokens", tok, "u32")
    w.add("row_bits", bits, "u32")
    w.add("row_valid", torch.tensor(VALID), "u32")
    w.add("labels", labels, "i32")
    w.add("loss", torch.tensor([loss.item(), float(n)]), "f32")
    w.add("grads", mf.flat([t.grad for t in params]).float(), "f32")
    out = os.path.normpath(a.out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "loss_mask_ref.bin"), "wb") as f:
        f.write(b"MKSREF01")
        f.write(struct.pack("<I", len(w.items)))
        for name, code, shape, data in w.items:
            nb = name.encode()
            f.write(struct.pack("<I", len(nb)) + nb)
            f.write(struct.pack("<II", code, len(shape)))
            f.write(struct.pack("<%dI" % len(shape), *shape))
            f.write(data)


if __name__ == "__main__":
    main()
