"""Training-side helpers without PyTorch: llmtrain's row order, its micro-batch plan and its batch layout.

``mkshards.torch`` wraps these as PyTorch datasets and samplers; they are usable with numpy alone.

llmtrain's loader (train/loader.c) sees the train split as an endless stream of row positions p = 0, 1, 2, ...;
position p reads row ``row_order(p)`` = a permutation of the rows keyed by (seed, epoch = p // n_rows). An
optimiser step takes ``rows_per_step`` positions, cut into micro-batches of at most ``micro_rows`` rows, where
``rows_per_step = max(1, batch_tokens // seq_len)`` and ``micro_rows = min(token_budget // seq_len,
rows_per_step)`` (what ``llmtrain --plan`` chooses when memory does not bind), so a micro-batch never holds more
than ``token_budget`` tokens.
"""
import math

import numpy as np

from . import _core
from ._shards import row_numbers

__all__ = ["row_order", "BatchPlan", "TokenBudgetBatches", "llm_batch", "worker_positions", "FIELDS"]

DEFAULT_SEED = 1337  # llmtrain --seed default
FIELDS = ("input_ids", "labels", "position_ids", "doc_ids", "loss_mask")  # llm_batch's arrays, in order


def check_fields(fields):
    """fields (None: all of FIELDS) as a tuple in FIELDS order; ValueError for an unknown or empty selection."""
    if fields is None:
        return FIELDS
    if isinstance(fields, str):
        fields = (fields,)
    want = set(fields)
    bad = want - set(FIELDS)
    if bad or not want:
        raise ValueError(f"fields: a non-empty selection of {FIELDS}" + (f", not {sorted(bad)}" if bad else ""))
    return tuple(f for f in FIELDS if f in want)


def row_order(start, count, n_rows, seed=DEFAULT_SEED, shuffle=True):
    """Rows llmtrain visits at loader positions start .. start+count-1 (numpy uint64 array). ``seed`` is any
    64-bit unsigned value (``llmtrain --seed``); a number out of its range raises ValueError naming it."""
    return np.frombuffer(_core.row_order(start, count, n_rows, seed, bool(shuffle)), np.uint64)


class BatchPlan:
    """Rows per step and per micro-batch for a token budget, as llmtrain plans them (memory aside)."""

    def __init__(self, seq_len, token_budget=None, batch_tokens=None, micro_rows=None):
        if seq_len < 1:
            raise ValueError("seq_len must be >= 1")
        self.seq_len = int(seq_len)
        self.batch_tokens = int(batch_tokens) if batch_tokens else self.seq_len
        self.token_budget = int(token_budget) if token_budget else self.batch_tokens
        self.rows_per_step = max(1, self.batch_tokens // self.seq_len)
        b = min(self.token_budget // self.seq_len, self.rows_per_step)
        if micro_rows:  # a smaller B, e.g. the one `llmtrain --plan` chose under a memory budget
            b = min(b, int(micro_rows))
        if b < 1:
            raise ValueError(f"one row of {self.seq_len} tokens exceeds the token budget of {self.token_budget} "
                             "tokens per micro-batch")
        self.micro_rows = b
        self.n_micro = math.ceil(self.rows_per_step / b)
        self.micro_tokens = b * self.seq_len

    def micro_batches(self, step):
        """(first position, rows) of each micro-batch of a step (positions relative to the run's start)."""
        R, B = self.rows_per_step, self.micro_rows
        base = step * R
        return [(base + m * B, min(B, R - m * B)) for m in range(self.n_micro)]

    def __repr__(self):
        return (f"BatchPlan(seq_len={self.seq_len}, micro_rows={self.micro_rows}, rows_per_step={self.rows_per_step}, "
                f"n_micro={self.n_micro})")


class TokenBudgetBatches:
    """Micro-batches of row indices in llmtrain's order: each is a list of at most ``micro_rows`` train rows
    (``micro_rows * seq_len <= token_budget`` tokens); ``rows_per_step`` rows make one optimiser step.

    ``steps`` (default: enough steps to visit every row once) and ``start_row`` (loader position to resume at,
    e.g. ``step * rows_per_step``) as in llmtrain; ``seed`` / ``shuffle`` pick the same permutation.
    """

    def __init__(self, n_rows, seq_len, token_budget=None, batch_tokens=None, *, seed=DEFAULT_SEED, shuffle=True,
                 start_row=0, steps=None, micro_rows=None):
        if hasattr(n_rows, "__len__") and not isinstance(n_rows, int):
            n_rows = len(n_rows)
        if n_rows < 1:
            raise ValueError("no rows to sample from")
        self.n_rows = int(n_rows)
        self.plan = BatchPlan(seq_len, token_budget, batch_tokens, micro_rows)
        self.seed, self.shuffle, self.start_row = seed, bool(shuffle), start_row
        _core.row_order(start_row, 0, self.n_rows, seed)  # checks start_row and seed now, not at the first batch
        R = self.plan.rows_per_step
        self.steps = int(steps) if steps is not None else math.ceil(self.n_rows / R)
        self.micro_rows, self.rows_per_step, self.n_micro = self.plan.micro_rows, R, self.plan.n_micro

    def __len__(self):
        return self.steps * self.n_micro

    def __iter__(self):
        R, B = self.rows_per_step, self.micro_rows
        for s in range(self.steps):
            rows = row_order(self.start_row + s * R, R, self.n_rows, self.seed, self.shuffle).tolist()
            for m in range(self.n_micro):
                yield rows[m * B:(m + 1) * B]


def llm_batch(shardset, rows, seq_len=None, *, split="train", doc_mask=True, ignore_index=-100, fields=None):
    """llmtrain's micro-batch layout for ``rows`` (train/loader.c, fill_one), as numpy arrays of (len(rows), T):

    - ``input_ids`` (int64): tokens[0:T]
    - ``labels`` (int64): tokens[j+1] where that token carries loss (loss_mask[j+1] == 1, j+1 < row_len), else
      ``ignore_index`` (llmtrain writes -1)
    - ``position_ids`` / ``doc_ids`` (int64): with ``doc_mask`` positions restart and the segment number grows
      where a document starts (llmtrain --doc-mask); without, 0..T-1 and 0
    - ``loss_mask`` (bool): labels != ignore_index

    ``fields`` (default: all five) picks the arrays to make, e.g. ``("input_ids", "labels")`` for a model without
    document masking: the others are not computed (less than half the memory traffic).
    """
    L = shardset.row_len
    T = L if seq_len is None else int(seq_len)
    if not 1 <= T <= L:
        raise ValueError(f"seq_len {T}: must be 1..{L} (the rows' length)")
    idx = row_numbers(rows, split, shardset.rows[split])
    n = len(idx)
    if n and idx.min() < 0:  # negative rows count from the end, as in Python
        idx = np.where(idx < 0, idx + shardset.rows[split], idx)
    fields = check_fields(fields)
    ints = [f for f in fields if f != "loss_mask"]
    block = np.empty((len(ints), n, T), np.int64)  # one allocation for the int arrays
    out = {f: block[k] for k, f in enumerate(ints)}
    if "loss_mask" in fields:
        out["loss_mask"] = np.empty((n, T), np.bool_)
    g = out.get
    shardset._c.fill(split, idx, T, bool(doc_mask), int(ignore_index), g("input_ids"), g("labels"),
                     g("position_ids"), g("doc_ids"), g("loss_mask"))
    return out


def worker_positions(n_rows, rank=0, world_size=1, worker_id=0, num_workers=1, epoch=0):
    """Loader positions (epoch * n_rows + i) this (rank, worker) reads: every row exactly once over all ranks and
    workers, strided so that round-robin over the workers gives back the single-process order."""
    total = world_size * num_workers
    wid = rank * num_workers + worker_id
    if not 0 <= wid < total:
        raise ValueError(f"rank {rank} / worker {worker_id} outside world_size {world_size} x {num_workers} workers")
    return range(epoch * n_rows + wid, (epoch + 1) * n_rows, total)
