"""mkshards.ShardSet: rows equal the C reader's as `mkshards inspect` prints them and the numpy-only reader's."""
import json
import os
import re
import sys

import numpy as np
import pytest

import mkshards
from conftest import ROOT, run_cli

sys.path.insert(0, os.path.join(ROOT, "tools", "python"))
import mkshards_reader  # noqa: E402  (the single-file numpy reader)


def inspect_row(mkshards_bin, d, split, i):
    """Segments and padding of one row as `mkshards inspect --ids` prints them."""
    out = run_cli(mkshards_bin, "inspect", "--ids", "--split", split, "--row", str(i), d).stdout
    lines = out.splitlines()
    segs, pad = [], None
    for k, l in enumerate(lines):
        g = re.match(r"\s+segment (\d+): positions (\d+)-(\d+)", l)
        if g:
            segs.append((int(g[1]), int(g[2]), int(g[3]), [int(x) for x in lines[k + 1].split()]))
        g = re.match(r"\s+padding: positions (\d+)-(\d+)", l)
        if g:
            pad = (int(g[1]), int(g[2]))
    return segs, pad


@pytest.mark.parametrize("kind", ["plain", "zstd", "u32"])
def test_rows_equal_inspect(mkshards_bin, shard_sets, kind):
    d = shard_sets[kind]
    ss = mkshards.ShardSet(d)
    man = json.load(open(os.path.join(d, "manifest.json")))
    assert ss.row_len == 96 and ss.rows["train"] == man["splits"]["train"]["rows"]
    assert ss.rows["val"] == man["splits"]["val"]["rows"] > 0
    assert ss.fingerprint == man["tokenizer"]["fingerprint"]
    assert ss.dtype == (np.uint32 if kind == "u32" else np.uint16)
    assert ss.tokenizer == ("cl100k_base" if kind == "u32" else "gpt2")
    assert ss.splits == ("train", "val") and len(ss) == ss.rows["train"]
    for split in ("train", "val"):
        n = ss.rows[split]
        for i in sorted({0, 1, n // 2, n - 1}):
            r = ss.row(i, split)
            segs, pad = inspect_row(mkshards_bin, d, split, i)
            assert segs
            for doc, a, b, ids in segs:
                assert r["tokens"][a:b + 1].tolist() == ids
                assert (r["doc_ids"][a:b + 1] == doc).all()
                assert (r["pos_ids"][a:b + 1] == np.arange(b - a + 1)).all()
                assert (r["loss_mask"][a:b + 1] == 1).all()
            if pad:
                assert (r["loss_mask"][pad[0]:] == 0).all() and (r["tokens"][pad[0]:] == ss.pad_id).all()
            else:
                assert r["loss_mask"].all()
        # token count over the split = the manifest's
        tot = sum(int(ss.read(range(a, min(a + 64, n)), split, tokens=False, pos_ids=False, doc_ids=False)
                      ["loss_mask"].sum()) for a in range(0, n, 64))
        assert tot == man["splits"][split]["tokens"] == ss.tokens[split]


def test_rows_equal_numpy_reader(shard_sets):
    """Every row of every set: the C reader (ShardSet) and tools/python/mkshards_reader.py agree."""
    for kind in ("plain", "u32"):
        d = shard_sets[kind]
        ss, ref = mkshards.ShardSet(d), mkshards_reader.ShardSet(d)
        for split in ("train", "val"):
            n = ss.rows[split]
            assert n == ref.num_rows(split)
            batch = ss.read(np.arange(n), split)
            for i in range(n):
                a, b = ss.row(i, split), ref.row(i, split)
                for k in ("tokens", "pos_ids", "doc_ids", "loss_mask"):
                    assert (a[k] == b[k]).all(), (kind, split, i, k)
                    assert (batch[k][i] == b[k]).all(), (kind, split, i, k)


def test_framing(shard_sets):
    """bos_id / eos_id as the manifest records them, equal to the numpy-only reader's; rows start with the BOS."""
    for kind, bos, eos in (("plain", None, 50256), ("framed", 50256, None)):
        ss, ref = mkshards.ShardSet(shard_sets[kind]), mkshards_reader.ShardSet(shard_sets[kind])
        assert (ss.bos_id, ss.eos_id) == (bos, eos) == (ref.bos_id, ref.eos_id), kind
        assert ss.info["bos_id"] == bos and ss.info["eos_id"] == eos
    # the id 50256 is written only as the frame and as padding (document text never encodes to it)
    for kind, frame in (("plain", "eot"), ("framed", "bos")):
        ss = mkshards.ShardSet(shard_sets[kind])
        with open(os.path.join(shard_sets[kind], "manifest.json")) as f:
            acc = json.load(f)["accounting"]
        n = sum(int((ss.read(np.arange(ss.rows[s]), s)["tokens"] == 50256).sum()) for s in ss.splits)
        docs = acc["documents"]["train"] + acc["documents"]["val"]
        assert acc["tokens"][frame] == docs and n == docs + acc["tokens"]["pad"], (kind, n, acc["tokens"])


def test_zero_copy_and_zstd(shard_sets):
    plain, z = mkshards.ShardSet(shard_sets["plain"]), mkshards.ShardSet(shard_sets["zstd"], verify=False)
    r = plain[0]
    assert np.shares_memory(r["tokens"], plain.shard_tokens(0))  # a view into the mapped file
    assert not r["tokens"].flags.writeable
    mm = plain.shard_tokens(0)
    assert mm.shape == (plain.shards()[0]["rows"], 96) and np.shares_memory(mm, plain.row(0)["tokens"])
    assert z.shard_tokens(0) is None and all(s["compressed"] for s in z.shards())
    for split in ("train", "val"):
        for i in range(plain.rows[split]):
            a, b = plain.row(i, split), z.row(i, split)
            assert all((a[k] == b[k]).all() for k in a), (split, i)
    wide = plain.read([0, 3, 0], token_dtype=np.uint32)
    assert wide["tokens"].dtype == np.uint32 and (wide["tokens"][1] == plain[3]["tokens"]).all()
    assert (wide["tokens"][0] == wide["tokens"][2]).all()


def test_errors(shard_sets, tmp_path):
    with pytest.raises(mkshards.MkshardsError, match="manifest"):
        mkshards.ShardSet(tmp_path)
    ss = mkshards.ShardSet(shard_sets["plain"])
    with pytest.raises(IndexError):
        ss.row(ss.rows["train"])
    with pytest.raises(IndexError):
        ss.read([0, 10 ** 9])
    with pytest.raises(ValueError, match="split must be 'train' or 'val', not 'test'"):
        ss.row(0, "test")
    with pytest.raises(ValueError, match="split 'test': must be train or val"):  # the C binding, names from C
        ss._c.shards("test")
    assert (ss[-1]["tokens"] == ss.row(ss.rows["train"] - 1)["tokens"]).all()
    # a tampered shard: verify=True refuses it with the C message naming the file
    import shutil
    d = tmp_path / "t"
    shutil.copytree(shard_sets["plain"], d)
    shard = d / os.path.basename(ss.shards()[0]["path"])
    b = bytearray(shard.read_bytes())
    b[200] ^= 0xFF
    shard.write_bytes(bytes(b))
    with pytest.raises(mkshards.MkshardsError, match=os.path.basename(shard)):
        mkshards.ShardSet(d, verify=True)
    ss.close()
    with pytest.raises(ValueError):
        ss.read([0])
