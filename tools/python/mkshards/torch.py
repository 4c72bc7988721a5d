"""PyTorch datasets over a shard set (imported only on ``import mkshards.torch``; needs torch).

    from mkshards.torch import ShardDataset, ShardIterableDataset, TokenBudgetBatchSampler

    ds = ShardDataset("shards/", seq_len=1024)
    # llmtrain's micro-batches: <= 8192 tokens each, 32768 tokens per optimiser step, the same seeded order
    sampler = TokenBudgetBatchSampler(ds, seq_len=1024, token_budget=8192, batch_tokens=32768, seed=1337)
    dl = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=None, num_workers=2)
    for b in dl:   # dict of (rows, 1024) tensors: input_ids, labels, position_ids, doc_ids, loss_mask
        loss = F.cross_entropy(model(b["input_ids"]).flatten(0, 1), b["labels"].flatten())  # ignore_index=-100

    it = ShardIterableDataset("shards/", shuffle=True, seed=1337)  # shards rows by (rank, world, worker)
    dl = torch.utils.data.DataLoader(it, batch_size=8, num_workers=4)

Items follow llmtrain's batch layout (``mkshards.data.llm_batch``): ``labels[j]`` is the next token where it
carries loss, else -100 (padding, and in version-2 sets from chat / prompt-completion builds every token whose loss
bit is clear: the prompt, the user turns); ``loss_mask[j]`` says the same as a bool; with ``doc_mask`` (default) positions restart at every document and ``doc_ids`` number
the documents of the row (mask attention where they differ).
"""
import operator as _operator

import numpy as _np
import torch as _torch
import torch.utils.data as _tud

from . import _core
from . import data as _data
from ._shards import ShardSet

__all__ = ["ShardDataset", "ShardIterableDataset", "TokenBudgetBatchSampler"]


def _tensors(batch, squeeze):
    if squeeze:
        return {k: _torch.from_numpy(v.reshape(-1)) for k, v in batch.items()}
    return {k: _torch.from_numpy(v) for k, v in batch.items()}


def _per_row(t):
    """dict of (n, T) tensors -> list of n dicts of (T,) views (one unbind per key, not n x 5 indexings)."""
    keys = list(t)
    return [dict(zip(keys, r)) for r in zip(*(t[k].unbind(0) for k in keys))]


class ShardDataset(_tud.Dataset):
    """Map-style: ``ds[i]`` is row i of the split as a dict of (T,) tensors; ``ds[[i, j, ...]]`` (a list, numpy
    array or tensor of indices, e.g. from :class:`TokenBudgetBatchSampler` with ``batch_size=None``) is one
    dict of (n, T) tensors read in one C call. ``fields`` (default: all of ``mkshards.data.FIELDS``) selects
    the tensors, e.g. ``("input_ids", "labels")``; the others are not computed."""

    def __init__(self, directory, split="train", seq_len=None, *, verify=True, doc_mask=True, ignore_index=-100,
                 shardset=None, fields=None):
        self.set = shardset if shardset is not None else ShardSet(directory, verify=verify)
        self.directory = self.set.directory
        self.split = split
        self.seq_len = int(seq_len) if seq_len else self.set.row_len
        if not 1 <= self.seq_len <= self.set.row_len:
            raise ValueError(f"seq_len {self.seq_len}: must be 1..{self.set.row_len}")
        self.doc_mask, self.ignore_index = doc_mask, ignore_index
        self.fields = _data.check_fields(fields)
        self._n = self.set.rows[split]
        self._ints = [(f, _data.FIELDS.index(f)) for f in self.fields if f != "loss_mask"]
        self._all = self.fields == _data.FIELDS
        if self._all:
            self._make_row_reader()

    def __len__(self):
        return self._n

    def _make_row_reader(self):
        # one row with every field: a C object makes the arrays, fills them and wraps them as tensors (the
        # five tensors are most of the cost of a row; the interpreter adds ~1 us more per row otherwise)
        self._row = self.set._c.row_maker(self.split, self.seq_len, self.doc_mask, self.ignore_index, _np.empty,
                                          _np.int64, _np.bool_, _torch.from_numpy, _data.FIELDS).row

    def __getstate__(self):  # the row reader is rebuilt after unpickling (DataLoader workers with spawn)
        state = dict(self.__dict__)
        state.pop("_row", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._all:
            self._make_row_reader()

    def __getitem__(self, idx):
        if type(idx) is int and self._all:
            return self._row(idx)
        if type(idx) is int or (hasattr(idx, "ndim") and idx.ndim == 0):  # one row: some fields, or a 0-d index
            i = _operator.index(idx)  # an integer: 1.5 is a TypeError, not row 1
            if self._all:
                return self.__getitem__(i)
            if i < 0:
                i += self._n
            if not 0 <= i < self._n:
                raise IndexError(i)
            T = self.seq_len
            blk = _np.empty((len(self._ints), T), _np.int64)  # one allocation for the int tensors
            outs = [None] * 5
            for j, (_, k) in enumerate(self._ints):
                outs[k] = blk[j]
            if "loss_mask" in self.fields:
                outs[4] = _np.empty(T, _np.bool_)
            self.set._c.fill(self.split, i, T, self.doc_mask, self.ignore_index, *outs)
            return {f: _torch.from_numpy(outs[_data.FIELDS.index(f)]) for f in self.fields}
        if isinstance(idx, _torch.Tensor):
            idx = idx.numpy()
        return _tensors(self._batch(idx), False)

    def __getitems__(self, indices):  # DataLoader with batch_size > 1: one C call per batch
        return _per_row(_tensors(self._batch(indices), False))

    def _batch(self, rows):
        return _data.llm_batch(self.set, rows, self.seq_len, split=self.split, doc_mask=self.doc_mask,
                               ignore_index=self.ignore_index, fields=self.fields)


class ShardIterableDataset(_tud.IterableDataset):
    """Iterable: every row of the split once per epoch, divided between (rank, world_size) and the DataLoader
    workers of each rank (strided, so the workers' round-robin gives the single-process order back). rank and
    world_size default to torch.distributed's when it is initialised. ``shuffle`` uses llmtrain's seeded
    per-epoch permutation; call ``set_epoch(e)`` between epochs. ``batch_rows`` > 1 yields dicts of
    (batch_rows, T) tensors read in one call (use ``batch_size=None`` in the DataLoader then); otherwise rows are
    read 32 at a time. ``fields`` as in :class:`ShardDataset`."""

    def __init__(self, directory, split="train", seq_len=None, *, rank=None, world_size=None, shuffle=False,
                 seed=_data.DEFAULT_SEED, epoch=0, verify=True, doc_mask=True, ignore_index=-100, batch_rows=1,
                 fields=None):
        super().__init__()
        self.set = ShardSet(directory, verify=verify)
        self.split = split
        self.seq_len = int(seq_len) if seq_len else self.set.row_len
        if not 1 <= self.seq_len <= self.set.row_len:
            raise ValueError(f"seq_len {self.seq_len}: must be 1..{self.set.row_len}")
        self.rank, self.world_size = rank, world_size
        self.shuffle, self.seed, self.epoch = shuffle, seed, epoch
        _core.row_order(0, 0, 1, seed)  # seed: 0..2^64-1 (llmtrain --seed), checked now
        self.doc_mask, self.ignore_index = doc_mask, ignore_index
        if batch_rows is None or int(batch_rows) < 1:
            raise ValueError(f"batch_rows {batch_rows!r}: must be >= 1")
        self.batch_rows = int(batch_rows)
        self.fields = _data.check_fields(fields)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def _world(self):
        rank, world = self.rank, self.world_size
        if rank is None or world is None:
            dist = _torch.distributed
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank() if rank is None else rank
                world = dist.get_world_size() if world is None else world
        return (rank or 0), (world or 1)

    def positions(self):
        """Loader positions this process (and DataLoader worker) reads, in order."""
        rank, world = self._world()
        w = _tud.get_worker_info()
        wid, nw = (w.id, w.num_workers) if w is not None else (0, 1)
        return _data.worker_positions(self.set.rows[self.split], rank, world, wid, nw, self.epoch)

    def rows(self):
        pos = self.positions()
        n = self.set.rows[self.split]
        if not len(pos):
            return []
        if not self.shuffle:
            return [p % n for p in pos]
        full = _data.row_order(pos.start, pos.stop - pos.start, n, self.seed, True)
        return full[::pos.step].tolist()

    def __iter__(self):
        rows = _np.asarray(self.rows(), _np.int64)
        k = self.batch_rows
        # rows are read in blocks (one C call each) and handed out one by one (measured per row at L=2048:
        # 8 rows 10.4 us, 16 rows 8.3, 32 rows 7.7, 64 rows 7.4-7.9)
        step = k if k > 1 else 32
        for a in range(0, len(rows), step):
            b = _data.llm_batch(self.set, rows[a:a + step], self.seq_len, split=self.split, doc_mask=self.doc_mask,
                                ignore_index=self.ignore_index, fields=self.fields)
            if k > 1:
                yield _tensors(b, False)
            else:
                yield from _per_row(_tensors(b, False))

    def __len__(self):
        n = len(self.positions())
        return -(-n // self.batch_rows)


class TokenBudgetBatchSampler(_data.TokenBudgetBatches, _tud.Sampler):
    """Batch sampler: lists of train-row indices in llmtrain's seeded order, at most ``token_budget`` tokens
    (``micro_rows`` rows of ``seq_len``) each; ``rows_per_step`` rows (``batch_tokens``) per optimiser step
    (``n_micro`` micro-batches). Use with ``DataLoader(ds, sampler=..., batch_size=None)`` for one C read per
    micro-batch, or ``batch_sampler=...``. See :class:`mkshards.data.TokenBudgetBatches` for the arguments."""

    def __init__(self, data_source, seq_len, token_budget=None, batch_tokens=None, **kw):
        _data.TokenBudgetBatches.__init__(self, data_source, seq_len, token_budget, batch_tokens, **kw)
