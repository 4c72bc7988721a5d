"""mkshards_reader - read `mkshards build` shard sets with numpy only.

    from mkshards_reader import ShardSet
    ds = ShardSet("shards/")                 # reads shards/manifest.json
    print(len(ds), ds.seq_len, ds.vocab_size, ds.eot_id)
    row = ds.row(0)                          # dict of numpy arrays, seq_len each
    row["tokens"], row["loss_mask"], row["pos_ids"], row["doc_ids"]
    for row in ds.rows(split="val"): ...
    tokens = ds.shard(0).tokens              # (rows, seq_len) memmap, u16 or u32

Format: docs/shard-format.md. Uncompressed shards are memory-mapped (nothing
is read until used). Shards built with --zstd need the `zstandard` module.
Only the file size and header fields are checked here; `mkshards verify`
checks the checksums (XXH3-64).

Row semantics (same as the C API ds_shardset_read):
  tokens     token ids; padding positions hold the pad id (= EOT)
  loss_mask  1 for real tokens (document tokens and their EOT), 0 for padding
  pos_ids    position inside the document segment: restarts at 0 where a
             document (or piece) starts, and at the row start
  doc_ids    segment number inside the row (mask attention where they differ);
             padding is one more segment
"""
import json
import os
import struct

import numpy as np

MAGIC = b"MKSHARD\0"
HEADER_BYTES = 192
F_ZSTD, F_VAL, F_SHUFFLED = 1, 2, 4

_HDR = struct.Struct("<8sIIIIIIIIII" + "Q" * 8 + "32s")


class ShardError(Exception):
    pass


class Shard:
    """One .mks file."""

    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            hb = f.read(HEADER_BYTES)
        if len(hb) < HEADER_BYTES or hb[:8] != MAGIC:
            raise ShardError(f"{path}: not a mkshards shard")
        (_, self.version, hdr_bytes, self.dtype_bytes, self.flags, self.row_len, self.vocab_size, self.pad_id,
         self.eot_id, self.frame_rows, _, self.n_rows, self.n_frames, self.n_starts, self.tokens_bytes,
         self.meta_bytes, self.n_blocks, self.payload_xxh3, self.blocks_xxh3, self.fingerprint) = _HDR.unpack_from(hb)
        if self.version != 1 or hdr_bytes != HEADER_BYTES:
            raise ShardError(f"{path}: unsupported shard version {self.version}")
        want = HEADER_BYTES + self.tokens_bytes + self.meta_bytes + 8 * self.n_blocks
        if size != want:
            raise ShardError(f"{path}: file size {size}, header says {want}")
        self.dtype = np.dtype("<u2" if self.dtype_bytes == 2 else "<u4")
        self.compressed = bool(self.flags & F_ZSTD)
        self.split = "val" if self.flags & F_VAL else "train"
        n, L = self.n_rows, self.row_len
        m0 = HEADER_BYTES + self.tokens_bytes
        mm = lambda dt, off, cnt: np.memmap(path, dtype=dt, mode="r", offset=off, shape=(cnt,)) if cnt else np.zeros(0, dt)
        self.valid = mm("<u4", m0, n)
        self.sidx = mm("<u4", m0 + 4 * n, n + 1)
        self.starts = mm("<u4", m0 + 4 * (2 * n + 1), self.n_starts)
        if self.compressed:
            self.frame_offsets = mm("<u8", m0 + 4 * (2 * n + 1 + self.n_starts), self.n_frames + 1)
            self.tokens = None
            self._raw = None
        else:
            self.tokens = (np.memmap(path, dtype=self.dtype, mode="r", offset=HEADER_BYTES, shape=(n, L))
                           if n else np.zeros((0, L), self.dtype))

    def __len__(self):
        return self.n_rows

    def _row_tokens(self, i):
        if not self.compressed:
            return self.tokens[i]
        try:
            import zstandard
        except ImportError as e:
            raise ShardError(f"{self.path}: compressed shard; pip install zstandard to read it") from e
        if self._raw is None:
            self._raw = np.memmap(self.path, dtype=np.uint8, mode="r", offset=HEADER_BYTES, shape=(self.tokens_bytes,))
        f = i // self.frame_rows
        a, b = int(self.frame_offsets[f]), int(self.frame_offsets[f + 1])
        rows = min(self.frame_rows, self.n_rows - f * self.frame_rows)
        buf = zstandard.ZstdDecompressor().decompress(bytes(self._raw[a:b]),
                                                      max_output_size=rows * self.row_len * self.dtype_bytes)
        arr = np.frombuffer(buf, dtype=self.dtype).reshape(rows, self.row_len)
        return arr[i - f * self.frame_rows]

    def row(self, i):
        """Row i as a dict of arrays: tokens (uint32), loss_mask (uint8), pos_ids, doc_ids (int32)."""
        if not 0 <= i < self.n_rows:
            raise IndexError(i)
        L = self.row_len
        nv = int(self.valid[i])
        st = np.asarray(self.starts[int(self.sidx[i]):int(self.sidx[i + 1])], dtype=np.int64)
        mark = np.zeros(L, dtype=bool)
        mark[st[st > 0]] = True
        if 0 < nv < L:
            mark[nv] = True
        doc_ids = np.cumsum(mark, dtype=np.int32)
        idx = np.arange(L, dtype=np.int32)
        seg_start = np.maximum.accumulate(np.where(mark, idx, 0))
        loss = (idx < nv).astype(np.uint8)
        return {"tokens": np.asarray(self._row_tokens(i), dtype=np.uint32), "loss_mask": loss,
                "pos_ids": idx - seg_start, "doc_ids": doc_ids, "n_valid": nv}


class ShardSet:
    """A directory written by `mkshards build` (or `mkshards merge`)."""

    def __init__(self, directory):
        self.dir = directory
        with open(os.path.join(directory, "manifest.json")) as f:
            self.manifest = json.load(f)
        m = self.manifest
        if m.get("format") != "mkshards-manifest":
            raise ShardError(f"{directory}: not a mkshards manifest")
        self.seq_len = m["seq_len"]
        tk = m["tokenizer"]
        self.vocab_size, self.eot_id, self.pad_id = tk["vocab_size"], tk["eot_id"], tk["pad_id"]
        # framing of each document (docs/shard-format.md "Framing"); absent: no BOS, EOS = eot_id; None: none
        self.bos_id, self.eos_id = tk.get("bos_id"), tk.get("eos_id", self.eot_id)
        self.fingerprint = tk["fingerprint"]
        self.shards = {"train": [], "val": []}
        for e in m["shards"]:
            s = Shard(os.path.join(directory, e["file"]))
            if s.n_rows != e["rows"] or s.row_len != self.seq_len or s.fingerprint.hex() != self.fingerprint \
                    or s.split != e["split"]:
                raise ShardError(f"{s.path}: header disagrees with the manifest")
            self.shards[e["split"]].append(s)
        self._first = {k: np.cumsum([0] + [len(s) for s in v]) for k, v in self.shards.items()}

    def __len__(self):
        return self.num_rows("train")

    def num_rows(self, split="train"):
        return int(self._first[split][-1])

    def shard(self, i, split="train"):
        return self.shards[split][i]

    def row(self, i, split="train"):
        first = self._first[split]
        if not 0 <= i < first[-1]:
            raise IndexError(i)
        k = int(np.searchsorted(first, i, side="right")) - 1
        return self.shards[split][k].row(i - int(first[k]))

    def rows(self, split="train"):
        for s in self.shards[split]:
            for i in range(len(s)):
                yield s.row(i)


if __name__ == "__main__":
    import sys

    ds = ShardSet(sys.argv[1])
    for split in ("train", "val"):
        n = ds.num_rows(split)
        toks = sum(int(s.valid.sum()) for s in ds.shards[split])
        print(f"{split}: {n} rows of {ds.seq_len}, {toks} tokens, {len(ds.shards[split])} shards")
