"""mkshards_reader - read `mkshards build` shard sets with numpy only.

    from mkshards_reader import ShardSet
    ds = ShardSet("shards/")                 # reads shards/manifest.json
    print(len(ds), ds.seq_len, ds.vocab_size, ds.eot_id)
    row = ds.row(0)                          # dict of numpy arrays, seq_len each
    row["tokens"], row["loss_mask"], row["pos_ids"], row["doc_ids"]
    for row in ds.rows(split="val"): ...
    tokens = ds.shard(0).tokens              # (rows, seq_len) read-only view of the mapped file, u16 or u32

Format: docs/shard-format.md. Uncompressed shards are memory-mapped (nothing
is read until used). Shards built with --zstd need the `zstandard` module.

What is checked (a shard set is untrusted input): the manifest and the shards
are opened only if they are regular files, without blocking (a FIFO or a
device under their names is refused at once, not waited on); the manifest's
size (at most 256 MiB), duplicate keys, and the type and range of every field
used; shard names are plain file names in the set's folder; every header
field as the C reader checks it (dtype, flags, row length, vocabulary, pad
and EOT ids, reserved fields, the section sizes and the file size); and, as
`mkshards verify` does, every row read: its valid count, its span of the
document-start table and its starts (strictly increasing, below the valid
count), its zstd frame, and every id (below vocab_size; the pad id at every
padding position). A violation raises ShardError naming the file, the byte
offset and the row. Not checked here: the XXH3-64 checksums (numpy has no
XXH3; `mkshards verify` or the `mkshards` package's ShardSet(verify=True)
check them).

Row semantics (same as the C API ds_shardset_read):
  tokens     token ids; padding positions hold the pad id (= EOT)
  loss_mask  1 where the token is a target (its prediction from the tokens
             before it is trained): version-1 shards every real token
             (document tokens and their EOT), version-2 shards (chat /
             prompt-completion builds) the stored loss bit; 0 on padding
  pos_ids    position inside the document segment: restarts at 0 where a
             document (or piece) starts, and at the row start
  doc_ids    segment number inside the row (mask attention where they differ);
             padding is one more segment
"""
import json
import mmap
import os
import stat
import struct

import numpy as np

MAGIC = b"MKSHARD\0"
HEADER_BYTES = 192
BLOCK_BYTES = 65536
F_ZSTD, F_VAL, F_SHUFFLED = 1, 2, 4
F_KNOWN = 7
# the C reader's limits (dataset/ds_shard.h)
MAX_ROW_LEN = 1 << 24
MAX_VOCAB = 1 << 24
MAX_TOKENS = 0xFFFFFFFF
MAX_FRAME_BYTES = 256 << 20
MAX_FILE_BYTES = 1 << 40
MAX_MANIFEST_BYTES = 256 << 20
MAX_SHARDS = 1 << 24

_HDR = struct.Struct("<8sIIIIIIIIII" + "Q" * 8 + "32s")


class ShardError(Exception):
    pass


def _open_regular(path, what):
    """A binary file object for path, only if it is a regular file. O_NONBLOCK: opening a FIFO must not wait for
    a writer (a plain open() blocks forever), and fstat on the opened file decides (no check-then-open race)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ShardError(f"{path}: not a regular file (a {what} must be one)")
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _plain_name(name):
    """Why name is not a plain file name in the set's folder (the C reader's ds_shard_name_check), or None."""
    if not isinstance(name, str) or not name:
        return "empty or not a string"
    b = name.encode("utf-8", "surrogateescape")
    if len(b) > 255:
        return "longer than NAME_MAX bytes"
    if "\0" in name:
        return "holds a NUL byte"
    if "/" in name:
        return "holds '/' (shards are plain file names in the set's folder)"
    if ".." in name:
        return "holds '..'"
    if name[0] == ".":
        return "starts with '.'"
    if any(c < 0x20 or c == 0x7F for c in b):
        return "holds a control byte"
    return None


class Shard:
    """One .mks file."""

    def __init__(self, path):
        self.path = path
        f, size = _open_regular(path, "shard")
        with f:
            hb = f.read(HEADER_BYTES)
            if len(hb) < HEADER_BYTES or hb[:8] != MAGIC:
                raise ShardError(f"{path}: not a mkshards shard")
            self._check_header(hb, size)
            self._map = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        n, L = self.n_rows, self.row_len
        self.dtype = np.dtype("<u2" if self.dtype_bytes == 2 else "<u4")
        self.compressed = bool(self.flags & F_ZSTD)
        self.split = "val" if self.flags & F_VAL else "train"
        self._meta0 = m0 = HEADER_BYTES + self.tokens_bytes
        view = lambda dt, off, cnt: np.frombuffer(self._map, dtype=dt, count=cnt, offset=off)
        self.valid = view("<u4", m0, n)
        self.sidx = view("<u4", m0 + 4 * n, n + 1)
        self.starts = view("<u4", m0 + 4 * (2 * n + 1), self.n_starts)
        if self.compressed:
            self.frame_offsets = view("<u8", m0 + 4 * (2 * n + 1 + self.n_starts), self.n_frames + 1)
            self.tokens = None
        else:
            self.tokens = view(self.dtype, HEADER_BYTES, n * L).reshape(n, L)
        # version 2: a loss bit per token, ceil(L / 8) bytes a row, bit i = byte i // 8, bit i % 8 (LSB first)
        self._loss_row = (L + 7) // 8
        self.loss_bits = (view("u1", m0 + self.meta_bytes, n * self._loss_row).reshape(n, self._loss_row)
                          if self.version == 2 else None)

    def _check_header(self, hb, size):
        """The field checks of the C reader's ds_shard_header_decode (its checksum aside), then the file size."""
        (_, self.version, hdr_bytes, self.dtype_bytes, self.flags, self.row_len, self.vocab_size, self.pad_id,
         self.eot_id, self.frame_rows, reserved, self.n_rows, self.n_frames, self.n_starts, self.tokens_bytes,
         self.meta_bytes, self.n_blocks, self.payload_xxh3, self.blocks_xxh3, self.fingerprint) = _HDR.unpack_from(hb)

        def bad(msg):
            raise ShardError(f"{self.path}: {msg}")

        if self.version not in (1, 2):
            bad(f"offset 8: unsupported shard version {self.version} (this reader knows 1 and 2)")
        self.loss_bytes, = struct.unpack_from("<Q", hb, 144)
        if hdr_bytes != HEADER_BYTES:
            bad(f"offset 12: header size {hdr_bytes}, version 1 headers are {HEADER_BYTES} bytes")
        if self.dtype_bytes not in (2, 4):
            bad(f"offset 16: dtype bytes {self.dtype_bytes} (must be 2 or 4)")
        if self.flags & ~F_KNOWN:
            bad(f"offset 20: unknown flag bits {self.flags & ~F_KNOWN:#x}")
        if not 1 <= self.row_len <= MAX_ROW_LEN:
            bad(f"offset 24: row length {self.row_len} (must be 1..{MAX_ROW_LEN})")
        if not 1 <= self.vocab_size <= MAX_VOCAB:
            bad(f"offset 28: vocab size {self.vocab_size} (must be 1..{MAX_VOCAB})")
        if self.dtype_bytes == 2 and self.vocab_size > 65536:
            bad(f"offset 16: dtype u16 cannot hold vocab size {self.vocab_size}")
        if self.pad_id >= self.vocab_size:
            bad(f"offset 32: pad id {self.pad_id} >= vocab size {self.vocab_size}")
        if self.eot_id >= self.vocab_size:
            bad(f"offset 36: EOT id {self.eot_id} >= vocab size {self.vocab_size}")
        if reserved != 0:
            bad(f"offset 44: reserved field is {reserved}, must be 0")
        r0 = 152 if self.version == 2 else 144  # version 2: the loss section's size at 144
        if any(hb[r0:184]):
            bad(f"offset {r0 + next(i for i, c in enumerate(hb[r0:184]) if c)}: reserved byte is not 0")
        n, L = self.n_rows, self.row_len
        tokens = n * L
        if tokens > MAX_TOKENS:
            bad(f"offset 48: {n} rows of {L} tokens exceed {MAX_TOKENS} tokens per shard")
        if self.n_starts > tokens:
            bad(f"offset 64: {self.n_starts} document starts > {tokens} token positions")
        frame_entries = 0
        if self.flags & F_ZSTD:
            fr = self.frame_rows
            if fr == 0:
                bad("offset 40: zstd shard with 0 rows per frame")
            if min(fr, n) * L * self.dtype_bytes > MAX_FRAME_BYTES:
                bad(f"offset 40: zstd frames of {fr} rows x {L} tokens exceed {MAX_FRAME_BYTES} bytes decoded")
            if self.n_frames != (n + fr - 1) // fr:
                bad(f"offset 56: {self.n_frames} zstd frames, {n} rows of {fr} per frame need {(n + fr - 1) // fr}")
            frame_entries = self.n_frames + 1
        else:
            if self.frame_rows or self.n_frames:
                bad(f"offset 40-63: frame fields ({self.frame_rows} rows per frame, {self.n_frames} frames) on an "
                    "uncompressed shard")
            if self.tokens_bytes != tokens * self.dtype_bytes:
                bad(f"offset 72: token section of {self.tokens_bytes} bytes, {n} rows of {L} x u{8 * self.dtype_bytes}"
                    f" need {tokens * self.dtype_bytes}")
        meta = 4 * (2 * n + 1 + self.n_starts) + 8 * frame_entries
        if self.meta_bytes != meta:
            bad(f"offset 80: row-metadata section of {self.meta_bytes} bytes, the counts need {meta}")
        loss = n * ((L + 7) // 8) if self.version == 2 else 0
        if self.loss_bytes != loss:
            bad(f"offset 144: loss section of {self.loss_bytes} bytes, {n} rows of {L} tokens need {loss}")
        payload = self.tokens_bytes + meta
        if payload > MAX_FILE_BYTES:
            bad(f"offset 72: token section of {self.tokens_bytes} bytes is too large")
        payload += loss
        blocks = (payload + BLOCK_BYTES - 1) // BLOCK_BYTES
        if self.n_blocks != blocks:
            bad(f"offset 88: {self.n_blocks} checksum blocks, {payload} payload bytes need {blocks}")
        want = HEADER_BYTES + payload + 8 * blocks
        if want > MAX_FILE_BYTES:
            bad(f"offset 72-95: shard of {want} bytes exceeds the {MAX_FILE_BYTES}-byte limit")
        if size != want:
            bad(f"offset {min(size, want)}: file size {size}, header says {want} "
                f"({'truncated' if size < want else 'trailing bytes'})")

    def __len__(self):
        return self.n_rows

    def _bad(self, msg):
        raise ShardError(f"{self.path}: {msg}")

    def _row_meta(self, i):
        """Row i's valid count and document starts, with the checks of `mkshards verify` (C: row_meta)."""
        n, L, m0 = self.n_rows, self.row_len, self._meta0
        nv = int(self.valid[i])
        a, b = int(self.sidx[i]), int(self.sidx[i + 1])
        if nv > L:
            self._bad(f"offset {m0 + 4 * i}: row {i} claims {nv} valid tokens > row length {L}")
        if a > b or b > self.n_starts:
            self._bad(f"offset {m0 + 4 * (n + i + 1)}: row {i} document-start index out of order")
        st = np.asarray(self.starts[a:b], dtype=np.int64)
        if len(st):
            bad = (st >= nv) | np.concatenate(([False], st[1:] <= st[:-1]))
            if bad.any():
                k = int(np.argmax(bad))
                self._bad(f"offset {m0 + 4 * (2 * n + 1 + a + k)}: row {i} document start {int(st[k])} invalid")
        if self.loss_bits is not None:  # no target on padding (C: row_meta)
            bits = np.unpackbits(self.loss_bits[i], bitorder="little")
            if bits[nv:].any():
                self._bad(f"offset {self._meta0 + self.meta_bytes + i * self._loss_row + nv // 8}: row {i} has a "
                          f"loss bit set on padding (valid {nv})")
        return nv, st

    def _row_tokens(self, i):
        if not self.compressed:
            return self.tokens[i]
        try:
            import zstandard
        except ImportError as e:
            raise ShardError(f"{self.path}: compressed shard; pip install zstandard to read it") from e
        f = i // self.frame_rows
        a, b = int(self.frame_offsets[f]), int(self.frame_offsets[f + 1])
        rows = min(self.frame_rows, self.n_rows - f * self.frame_rows)
        want = rows * self.row_len * self.dtype_bytes
        buf = None
        if a <= b <= self.tokens_bytes:
            try:
                buf = zstandard.ZstdDecompressor().decompress(
                    self._map[HEADER_BYTES + a:HEADER_BYTES + b], max_output_size=want)
            except zstandard.ZstdError:
                buf = None
        if buf is None or len(buf) != want:
            self._bad(f"row {i}: zstd frame {f} does not decode (offset {HEADER_BYTES + a})")
        arr = np.frombuffer(buf, dtype=self.dtype).reshape(rows, self.row_len)
        return arr[i - f * self.frame_rows]

    def _check_ids(self, i, t, nv):
        """Every real id below vocab_size, the pad id at every padding position (C: row_ids)."""
        bad_real = np.flatnonzero(t[:nv] >= self.vocab_size)
        bad_pad = np.flatnonzero(t[nv:] != self.pad_id)
        if not len(bad_real) and not len(bad_pad):
            return
        p = int(bad_real[0]) if len(bad_real) else nv + int(bad_pad[0])
        v = int(t[p])
        what = (f"is outside the vocabulary of {self.vocab_size} ids" if v >= self.vocab_size
                else f"is padding that is not the pad id, {self.pad_id}")
        where = (f"row {i} position {p} (compressed)" if self.compressed else
                 f"offset {HEADER_BYTES + (i * self.row_len + p) * self.dtype_bytes}: row {i} position {p}")
        self._bad(f"{where}: token id {v} {what}")

    def row(self, i):
        """Row i as a dict of arrays: tokens (uint32), loss_mask (uint8), pos_ids, doc_ids (int32)."""
        if not 0 <= i < self.n_rows:
            raise IndexError(i)
        L = self.row_len
        nv, st = self._row_meta(i)
        tokens = np.asarray(self._row_tokens(i), dtype=np.uint32)
        self._check_ids(i, tokens, nv)
        mark = np.zeros(L, dtype=bool)
        mark[st[st > 0]] = True
        if 0 < nv < L:
            mark[nv] = True
        doc_ids = np.cumsum(mark, dtype=np.int32)
        idx = np.arange(L, dtype=np.int32)
        seg_start = np.maximum.accumulate(np.where(mark, idx, 0))
        if self.loss_bits is not None:
            loss = np.unpackbits(self.loss_bits[i], bitorder="little")[:L].astype(np.uint8)
        else:
            loss = (idx < nv).astype(np.uint8)
        return {"tokens": tokens, "loss_mask": loss, "pos_ids": idx - seg_start, "doc_ids": doc_ids, "n_valid": nv}


def _no_duplicate_keys(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ShardError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _read_manifest(path):
    f, size = _open_regular(path, "manifest")
    with f:
        if size > MAX_MANIFEST_BYTES:
            raise ShardError(f"{path}: {size} bytes, a manifest is at most {MAX_MANIFEST_BYTES}")
        text = f.read(MAX_MANIFEST_BYTES + 1)
    try:
        m = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, ShardError, RecursionError) as e:
        raise ShardError(f"{path}: {e}") from None
    if not isinstance(m, dict) or m.get("format") != "mkshards-manifest":
        raise ShardError(f"{path}: not a mkshards manifest")
    return m


class ShardSet:
    """A directory written by `mkshards build` (or `mkshards merge`)."""

    def __init__(self, directory):
        self.dir = directory
        mpath = os.path.join(directory, "manifest.json")
        self.manifest = m = _read_manifest(mpath)

        def bad(msg):
            raise ShardError(f"{mpath}: {msg}")

        self.seq_len = m.get("seq_len")
        if not _is_int(self.seq_len) or not 1 <= self.seq_len <= MAX_ROW_LEN:
            bad(f'"seq_len" must be an integer 1..{MAX_ROW_LEN}')
        tk = m.get("tokenizer")
        if not isinstance(tk, dict):
            bad('"tokenizer" missing or not an object')
        self.vocab_size, self.eot_id, self.pad_id = tk.get("vocab_size"), tk.get("eot_id"), tk.get("pad_id")
        if not _is_int(self.vocab_size) or not 1 <= self.vocab_size <= MAX_VOCAB:
            bad(f'"tokenizer.vocab_size" must be an integer 1..{MAX_VOCAB}')
        for k in ("eot_id", "pad_id"):
            if not _is_int(tk.get(k)) or not 0 <= tk[k] < self.vocab_size:
                bad(f'"tokenizer.{k}" must be an integer below vocab_size {self.vocab_size}')
        # framing of each document (docs/shard-format.md "Framing"); absent: no BOS, EOS = eot_id; None: none
        self.bos_id, self.eos_id = tk.get("bos_id"), tk.get("eos_id", self.eot_id)
        for k, v in (("bos_id", self.bos_id), ("eos_id", self.eos_id)):
            if v is not None and (not _is_int(v) or not 0 <= v < self.vocab_size):
                bad(f'"tokenizer.{k}" must be null or an integer below vocab_size {self.vocab_size}')
        self.fingerprint = tk.get("fingerprint")
        if not isinstance(self.fingerprint, str) or len(self.fingerprint) != 64 or \
                any(c not in "0123456789abcdef" for c in self.fingerprint):
            bad('"tokenizer.fingerprint" must be 64 lowercase hex digits')
        self.shard_version = m.get("shard_format_version")
        if self.shard_version not in (1, 2) or not _is_int(self.shard_version):
            bad('"shard_format_version" must be 1 or 2')
        entries = m.get("shards")
        if not isinstance(entries, list):
            bad('"shards" missing or not an array')
        if len(entries) > MAX_SHARDS:
            bad(f"{len(entries)} shards listed, at most {MAX_SHARDS}")
        self.shards = {"train": [], "val": []}
        seen = set()
        for i, e in enumerate(entries):
            if not isinstance(e, dict):
                bad(f"shards[{i}] is not an object")
            why = _plain_name(e.get("file"))
            if why:
                bad(f"shards[{i}].file {str(e.get('file'))[:80]!r} is not a plain file name: {why}")
            if e["file"] in seen:
                bad(f"shard {e['file']} is listed twice")
            seen.add(e["file"])
            if e.get("split") not in ("train", "val"):
                bad(f'shards[{i}] ({e["file"]}): "split" must be "train" or "val"')
            if not _is_int(e.get("rows")) or not 0 <= e["rows"] <= MAX_TOKENS // self.seq_len:
                bad(f'shards[{i}] ({e["file"]}): "rows" must be an integer 0..{MAX_TOKENS // self.seq_len}')
            s = Shard(os.path.join(directory, e["file"]))
            if s.n_rows != e["rows"] or s.row_len != self.seq_len or s.fingerprint.hex() != self.fingerprint \
                    or s.split != e["split"] or s.vocab_size != self.vocab_size or s.version != self.shard_version:
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
