"""ShardSet: a `mkshards build` shard set through the C reader (dataset/ds.h)."""
import bisect
import operator
import os
import stat

import numpy as np

from . import _core

__all__ = ["ShardSet"]

SPLITS = _core.SPLIT_NAMES  # ("train", "val"), from the C library's table (ds_split_name)


class ShardSet:
    """A shard set (``DIR/manifest.json`` + shards) opened with ``ds_shardset_open``.

    ``verify=True`` hashes every file against the manifest on open (like ``llmtrain``); ``verify=False`` does the
    cheap checks only (headers, sizes, manifest agreement).

    ``ss[i]`` / ``ss.row(i, split)`` give one row as a dict of numpy arrays of ``row_len`` entries:

    - ``tokens``: the ids in the shards' dtype (``ss.dtype``: uint16 or uint32); for uncompressed shards a
      read-only view into a memory map of the file (no copy), padding holds ``pad_id``
    - ``pos_ids`` (int32): position inside the document segment, restarting at 0 where a document starts
    - ``doc_ids`` (int32): segment number inside the row (padding is one more segment)
    - ``loss_mask`` (uint8): 1 where the token is a target (its prediction from the tokens before it is
      trained): every real token of a version-1 set (documents and their EOT), the stored loss bit of a version-2
      set (chat / prompt-completion builds; ``ss.shard_version``); 0 on padding

    ``ss.read(indices, split)`` reads many rows at once into (n, row_len) arrays (one C call, GIL released).
    """

    def __init__(self, directory, verify=True):
        self.directory = os.fspath(directory)
        self._c = _core.ShardSet(self.directory, verify)
        info = self._c.info()
        self.info = info
        self.row_len = info["row_len"]
        self.seq_len = self.row_len
        self.vocab_size = info["vocab_size"]
        self.eot_id = info["eot_id"]
        self.pad_id = info["pad_id"]
        # framing of each document (docs/shard-format.md "Framing"); None: none
        self.bos_id, self.eos_id = info["bos_id"], info["eos_id"]
        self.dtype = np.dtype("<u2" if info["dtype_bytes"] == 2 else "<u4")
        self.fingerprint = info["fingerprint"]
        self.tokenizer = info["tokenizer"]
        self.rows = dict(info["rows"])
        self.tokens = dict(info["tokens"])
        # shard format 2: a loss bit per token; loss_tokens = the targets per split (= tokens in version 1)
        self.shard_version = info["shard_version"]
        self.loss_tokens = dict(info["loss_tokens"])
        self.splits = tuple(s for s in SPLITS if self.rows[s])
        self._shards = {s: self._c.shards(s) for s in SPLITS}
        self._first = {}
        for s in SPLITS:
            acc, first = 0, []
            for sh in self._shards[s]:
                first.append(acc)
                acc += sh["rows"]
            self._first[s] = first
        self._mm = {s: [None] * len(self._shards[s]) for s in SPLITS}
        self._views = {s: [None] * len(self._shards[s]) for s in SPLITS}  # plain ndarray views (faster slicing)

    # ------------------------------------------------------------ basics
    def __len__(self):
        return self.rows["train"]

    def __repr__(self):
        return (f"<ShardSet {self.directory!r}: {self.rows['train']} train + {self.rows['val']} val rows of "
                f"{self.row_len}, tokenizer {self.tokenizer}>")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._mm = {s: [None] * len(self._shards[s]) for s in SPLITS}
        self._views = {s: [None] * len(self._shards[s]) for s in SPLITS}
        self._c.close()

    def __getstate__(self):  # re-opened (without hashing again) after unpickling, e.g. in a DataLoader worker
        return {"directory": self.directory}

    def __setstate__(self, state):
        self.__init__(state["directory"], verify=False)

    def shards(self, split="train"):
        """The shards of a split, in order: dicts with path, rows, dtype_bytes, compressed, ..."""
        return [dict(s) for s in self._shards[_split(split)]]

    def shard_tokens(self, k, split="train"):
        """Token rows of shard k as a read-only (rows, row_len) memory map, or None for a zstd shard."""
        split = _split(split)
        mm = self._mm[split][k]
        if mm is None:
            sh = self._shards[split][k]
            if sh["compressed"]:
                return None
            if sh["rows"] == 0:
                return np.zeros((0, self.row_len), self.dtype)
            with _open_regular(sh["path"]) as f:
                mm = np.memmap(f, dtype=self.dtype, mode="r", offset=sh["tokens_offset"],
                               shape=(sh["rows"], self.row_len))
            self._mm[split][k] = mm
        return mm

    def _locate(self, i, split):
        n = self.rows[split]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} out of range: the {split} split has {n} rows")
        first = self._first[split]
        k = bisect.bisect_right(first, i) - 1
        return i, k, i - first[k]

    # ------------------------------------------------------------ rows
    def __getitem__(self, i):
        return self.row(i)

    def row(self, i, split="train"):
        """One row: dict of tokens, pos_ids, doc_ids, loss_mask (see the class doc)."""
        split = _split(split)
        i, k, r = self._locate(operator.index(i), split)
        L = self.row_len
        pos = np.empty(L, np.int32)
        doc = np.empty(L, np.int32)
        mask = np.empty(L, np.uint8)
        v = self._views[split][k]
        if v is None:
            mm = self.shard_tokens(k, split)
            v = False if mm is None else np.asarray(mm)
            self._views[split][k] = v
        if v is not False:
            self._c.read(split, i, None, pos, doc, mask)
            tokens = v[r]
        else:
            tokens = np.empty(L, self.dtype)
            self._c.read(split, i, tokens, pos, doc, mask)
        return {"tokens": tokens, "pos_ids": pos, "doc_ids": doc, "loss_mask": mask}

    def read(self, indices, split="train", *, tokens=True, pos_ids=True, doc_ids=True, loss_mask=True,
             token_dtype=None):
        """Rows ``indices`` (ints) as a dict of (n, row_len) arrays (copies). ``token_dtype`` (default: the shards'
        dtype) may be uint32 for every set, uint16 for 2-byte sets. Unwanted arrays can be switched off."""
        split = _split(split)
        idx = row_numbers(indices, split, self.rows[split])
        n, L = len(idx), self.row_len
        out = {}
        if tokens:
            out["tokens"] = np.empty((n, L), np.dtype(token_dtype) if token_dtype is not None else self.dtype)
        if pos_ids:
            out["pos_ids"] = np.empty((n, L), np.int32)
        if doc_ids:
            out["doc_ids"] = np.empty((n, L), np.int32)
        if loss_mask:
            out["loss_mask"] = np.empty((n, L), np.uint8)
        self._c.read(split, idx, out.get("tokens"), out.get("pos_ids"), out.get("doc_ids"), out.get("loss_mask"))
        return out

    def iter_rows(self, split="train"):
        split = _split(split)
        for i in range(self.rows[split]):
            yield self.row(i, split)


_I64_MAX = (1 << 63) - 1


def row_numbers(rows, split, n_rows):
    """Row numbers (an int, a sequence or an array of integers) as a flat int64 array for the C reader. Integers
    only: a float or bool array is a TypeError, not truncated; a number beyond int64 is an IndexError naming it
    (numpy would turn a uint64 2**64 - 1 into row -1, the last row for llm_batch)."""
    def out_of_range(v):
        return IndexError(f"row {v} out of range: the {split} split has {n_rows} rows")

    if isinstance(rows, (np.ndarray, np.generic)):
        a = np.asarray(rows)
        if a.size == 0:
            return np.zeros(0, np.int64)
        if a.dtype.kind == "u":
            big = np.flatnonzero(a.reshape(-1) > _I64_MAX)
            if len(big):
                raise out_of_range(int(a.reshape(-1)[big[0]]))
        elif a.dtype.kind == "O":
            return row_numbers(a.reshape(-1).tolist(), split, n_rows)
        elif a.dtype.kind != "i":
            raise TypeError(f"rows: integers, not {a.dtype}")
        return np.ascontiguousarray(a, dtype=np.int64).reshape(-1)
    try:
        vals = [operator.index(rows)]
    except TypeError:
        vals = [operator.index(v) for v in rows]
    for v in vals:
        if not -_I64_MAX - 1 <= v <= _I64_MAX:
            raise out_of_range(v)
    return np.array(vals, dtype=np.int64)


def _open_regular(path):
    """path opened for reading only if it is a regular file, without blocking: the C reader checked the shard on
    open, but a FIFO or device that took its name since must not hang (or feed) np.memmap."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _core.MkshardsError(f"{path}: not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _split(split):
    if split not in SPLITS:
        raise ValueError(f"split must be {' or '.join(map(repr, SPLITS))}, not {split!r}")
    return split
