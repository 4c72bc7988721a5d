#!/usr/bin/env python3
"""Rows/s of the Python readers on a version-1 set and the same set as version 2 (a loss bit per token, issue
28 item 3): decoding the loss bits must not be a per-token Python loop (target: v2 >= 0.8 x v1).

    mkshards build -t gpt2 -L 1024 -o v1 web.jsonl.zst && cp -r v1 v2 && hostile_shards_gen lossify v2
    python3 tools/bench/bench_loss_read.py v1 v2

Readers: mkshards.ShardSet.read (C), mkshards.data.llm_batch (labels -100 off the mask, C; random rows, and
in order), mkshards_reader.ShardSet.row (numpy only). Random rows of a version-2 set touch its loss section too,
a second place in the file per row: that is most of what random-row llm_batch loses. Random batches of 64 rows, best of 3 passes, in process CPU time (the
machine may be shared)."""
import os
import sys
import time

import numpy as np

import mkshards
from mkshards import data

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import mkshards_reader  # noqa: E402


def rate(fn, rows):
    best = 0.0
    for _ in range(3):
        t = time.process_time()
        n = fn()
        best = max(best, n / max(time.process_time() - t, 1e-9))
    return best


def bench(d):
    ss = mkshards.ShardSet(d)
    n = ss.rows["train"]
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, n, 64) for _ in range(max(1, 4 * n // 64))]

    def c_read():
        for b in batches:
            ss.read(b, "train")
        return 64 * len(batches)

    def llm():
        for b in batches:
            data.llm_batch(ss, b, split="train")
        return 64 * len(batches)

    seq = [np.arange(i, min(i + 64, n)) for i in range(0, n, 64)]

    def llm_seq():
        for b in seq:
            data.llm_batch(ss, b, split="train")
        return n

    rd = mkshards_reader.ShardSet(d)

    def np_rows():
        k = min(n, 2000)
        for i in range(k):
            rd.row(int(i), "train")
        return k

    return ss.shard_version, {"ShardSet.read": rate(c_read, n), "data.llm_batch": rate(llm, n),
                              "data.llm_batch in order": rate(llm_seq, n),
                              "mkshards_reader.row": rate(np_rows, n)}


if __name__ == "__main__":
    (v1, r1), (v2, r2) = bench(sys.argv[1]), bench(sys.argv[2])
    assert (v1, v2) == (1, 2), (v1, v2)
    worst = 10.0
    for k in r1:
        worst = min(worst, r2[k] / r1[k])
        print(f"{k:24s} v1 {r1[k]:12,.0f} rows/s   v2 {r2[k]:12,.0f} rows/s   v2/v1 {r2[k] / r1[k]:.2f}")
    print(f"worst v2/v1 {worst:.2f} (target >= 0.8)")
    sys.exit(0 if worst >= 0.8 else 1)
