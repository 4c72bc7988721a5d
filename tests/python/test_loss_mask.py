"""Version-2 shard sets (a loss bit per token, issue 28 item 3) in the Python readers.

The set is a real CLI build whose shards tests/hostile_shards_gen.c (`lossify`) rewrote as version 2: token i of
row r of each shard file is a target where (r + i) % 3 != 0 (real tokens only). Checked: mkshards_reader (numpy),
mkshards.ShardSet, mkshards.data.llm_batch and the torch datasets give loss_mask / labels from those bits
(labels = -100 where the next token's bit is clear and on padding), version-1 sets keep every real token a
target, and a loss bit on padding is refused by every reader.
"""
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import mkshards
from mkshards import data

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "python"))
import mkshards_reader  # noqa: E402


def bit(r, i):
    return (r + i) % 3 != 0


@pytest.fixture(scope="module")
def gen():
    g = os.environ.get("MKS_SHARD_GEN") or os.path.join(os.getcwd(), "tests", "hostile_shards_gen")
    if not os.access(g, os.X_OK):
        pytest.skip(f"hostile_shards_gen not found at {g} (ctest sets MKS_SHARD_GEN)")
    return g


@pytest.fixture(scope="module")
def v2(shard_sets, gen, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("v2") / "set")
    shutil.copytree(shard_sets["plain"], d)
    subprocess.run([gen, "lossify", d], check=True)
    return d


def expected_mask(ss_np, split, k):
    """(rows, L) loss bits of shard file k of split, from the lossify rule."""
    sh = ss_np.shards[split][k]
    L = sh.row_len
    m = np.zeros((sh.n_rows, L), np.uint8)
    for r in range(sh.n_rows):
        nv = int(sh.valid[r])
        m[r, :nv] = [bit(r, i) for i in range(nv)]
    return m


def test_readers_give_the_stored_bits(v2):
    rd = mkshards_reader.ShardSet(v2)
    assert rd.shard_version == 2
    ss = mkshards.ShardSet(v2)  # verify=True: every file hashed against the manifest
    assert ss.shard_version == 2
    assert ss.loss_tokens["train"] < ss.tokens["train"]
    for split in ("train", "val"):
        want = np.concatenate([expected_mask(rd, split, k) for k in range(len(rd.shards[split]))])
        assert want.shape[0] == ss.rows[split]
        assert int(want.sum()) == ss.loss_tokens[split]
        got = ss.read(np.arange(ss.rows[split]), split)["loss_mask"]
        assert (got == want).all()
        for i in (0, 1, ss.rows[split] - 1):
            assert (ss.row(i, split)["loss_mask"] == want[i]).all()
            assert (rd.row(i, split)["loss_mask"] == want[i]).all()


def test_llm_batch_labels_follow_the_bits(v2, shard_sets):
    ss = mkshards.ShardSet(v2, verify=False)
    L = ss.row_len
    rows = np.arange(len(ss))
    ref = ss.read(rows)
    for T in (L - 1, 50):
        for doc_mask in (True, False):
            b = data.llm_batch(ss, rows, T, doc_mask=doc_mask)
            tok, m = ref["tokens"].astype(np.int64), ref["loss_mask"]
            want = np.where(m[:, 1:T + 1] == 1, tok[:, 1:T + 1], -100)
            assert (b["labels"] == want).all()
            assert (b["loss_mask"] == (want != -100)).all()
            assert (b["input_ids"] == tok[:, :T]).all()
    # the bits remove targets: about a third of the real tokens' labels are -100 here
    b = data.llm_batch(ss, rows, L - 1)
    v1 = data.llm_batch(mkshards.ShardSet(shard_sets["plain"], verify=False), rows, L - 1)
    assert (b["input_ids"] == v1["input_ids"]).all()
    assert b["loss_mask"].sum() < v1["loss_mask"].sum()
    assert ((b["labels"] != -100) <= (v1["labels"] != -100)).all()


def test_torch_datasets_labels(v2):
    torch = pytest.importorskip("torch", reason="PyTorch not installed: mkshards.torch not tested")
    import mkshards.torch as mt
    ss = mkshards.ShardSet(v2, verify=False)
    T = ss.row_len - 1
    want = data.llm_batch(ss, np.arange(len(ss)), T)
    ds = mt.ShardDataset(v2, seq_len=T)
    for i in (0, 3, len(ds) - 1):
        it = ds[i]
        assert it["labels"].tolist() == want["labels"][i].tolist()
        assert it["loss_mask"].tolist() == want["loss_mask"][i].astype(bool).tolist()
        # what a training loop computes: cross entropy over the targets only
        logits = torch.zeros((T, ss.vocab_size))
        n = int((it["labels"] != -100).sum())
        if n:
            loss = torch.nn.functional.cross_entropy(logits, it["labels"], ignore_index=-100)
            assert abs(loss.item() - np.log(ss.vocab_size)) < 1e-4
    itd = mt.ShardIterableDataset(v2, seq_len=T, batch_rows=4, verify=False)
    b = next(iter(itd))
    assert b["labels"].tolist() == want["labels"][:4].tolist()


def test_loss_bit_on_padding_is_refused(v2, gen, tmp_path):
    d = str(tmp_path / "bad")
    shutil.copytree(v2, d)
    rd = mkshards_reader.ShardSet(d)
    for k, sh in enumerate(rd.shards["train"]):
        pad = np.flatnonzero(sh.valid < sh.row_len)
        if len(pad):
            break
    else:
        pytest.skip("no padded row in the train split")
    r, L = int(pad[0]), sh.row_len
    path = sh.path
    name = os.path.basename(path)
    with open(path, "rb") as f:
        b = bytearray(f.read())
    tb, mb = struct.unpack_from("<QQ", b, 72)
    off = 192 + tb + mb + r * ((L + 7) // 8) + (L - 1) // 8
    b[off] |= 1 << ((L - 1) % 8)
    with open(path, "wb") as f:
        f.write(b)
    subprocess.run([gen, "patch", path, "8", "4", "2", "payload"], check=True)  # checksums recomputed
    subprocess.run([gen, "rehash", d], check=True)
    first = sum(rd.shards["train"][j].n_rows for j in range(k))
    with pytest.raises(mkshards_reader.ShardError, match=f"row {r} has a loss bit set on padding"):
        mkshards_reader.ShardSet(d).row(first + r)
    with pytest.raises(mkshards.MkshardsError, match=rf"{name}: offset \d+: row {r} has a loss bit set on padding"):
        mkshards.ShardSet(d)  # verify=True runs `mkshards verify`'s checks on open
    ss = mkshards.ShardSet(d, verify=False)  # cheap open: the row read refuses it
    with pytest.raises(mkshards.MkshardsError, match="loss bit set on padding"):
        data.llm_batch(ss, [first + r], L - 1)
    with pytest.raises(mkshards.MkshardsError, match="loss bit set on padding"):
        ss.row(first + r)
    with pytest.raises(mkshards.MkshardsError, match=name):
        ss.read([first + r])


def test_version_1_sets_unchanged(shard_sets):
    ss = mkshards.ShardSet(shard_sets["plain"], verify=False)
    assert ss.shard_version == 1 and ss.loss_tokens == ss.tokens
    m = ss.read(np.arange(len(ss)))["loss_mask"]
    rd = mkshards_reader.ShardSet(shard_sets["plain"])
    valid = np.concatenate([s.valid for s in rd.shards["train"]])
    assert (m.sum(axis=1) == valid).all()
