"""llmtrain's order and batch layout (mkshards.data) against llmtrain's own loader, and mkshards.torch."""
import os
import subprocess

import numpy as np
import pytest

import mkshards
from mkshards import data


def loader_dump(d, T, B, R, seed, doc_mask, start, n):
    exe = os.environ.get("MKS_LOADER_DUMP")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("MKS_LOADER_DUMP (tests/python_loader_dump.c, built by the C build) not set")
    out = subprocess.run([exe, d, str(T), str(B), str(R), str(seed), str(doc_mask), str(start), str(n)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    batches, k = [], 0
    while k < len(out):
        h = out[k].split()
        rows = int(h[4])
        cur = {"step": int(h[1]), "micro": int(h[2]), "n_micro": int(h[3]), "rows": rows, "first": int(h[5])}
        arr = {t: [] for t in ("in", "tgt", "pos", "seg")}
        for r in range(rows):
            for j, t in enumerate(("in", "tgt", "pos", "seg")):
                line = out[k + 1 + 4 * r + j].split()
                assert line[0] == t
                arr[t].append([int(x) for x in line[1:]])
        cur.update({t: np.array(v, np.int64) for t, v in arr.items()})
        batches.append(cur)
        k += 1 + 4 * rows
    return batches


def test_row_order_is_a_permutation():
    for n in (1, 2, 3, 17, 1000, 4097):
        for e in range(2):
            p = data.row_order(e * n, n, n, seed=7)
            assert sorted(p.tolist()) == list(range(n))
    assert data.row_order(0, 5, 10, shuffle=False).tolist() == [0, 1, 2, 3, 4]
    assert data.row_order(0, 50, 50, seed=1).tolist() != data.row_order(0, 50, 50, seed=2).tolist()


@pytest.mark.parametrize("T,budget,batch_tokens,seed,doc_mask,start", [
    (96, 96 * 3, 96 * 7, 1337, 1, 0),      # B=3, R=7: micro-batches of 3, 3, 1
    (64, 64 * 4, 64 * 4, 5, 0, 0),         # rows cut to T < row_len, no doc mask
    (96, 96 * 2, 96 * 5, 99, 1, 13),       # resumed at loader position 13
])
def test_sampler_matches_llmtrain_loader(shard_sets, T, budget, batch_tokens, seed, doc_mask, start):
    d = shard_sets["plain"]
    ss = mkshards.ShardSet(d)
    n = ss.rows["train"]
    sampler = data.TokenBudgetBatches(n, T, budget, batch_tokens, seed=seed, start_row=start,
                                      steps=(2 * n) // (batch_tokens // T) + 1)  # past an epoch boundary
    plan = sampler.plan
    assert plan.micro_rows * T <= budget
    ref = loader_dump(d, T, plan.micro_rows, plan.rows_per_step, seed, doc_mask, start, len(sampler))
    assert len(ref) == len(sampler)
    for k, (rows, b) in enumerate(zip(sampler, ref)):
        assert len(rows) == b["rows"] and b["n_micro"] == plan.n_micro
        got = data.llm_batch(ss, rows, T, doc_mask=bool(doc_mask), ignore_index=-1)
        assert (got["input_ids"] == b["in"]).all(), k
        assert (got["labels"] == b["tgt"]).all(), k
        assert (got["position_ids"] == b["pos"]).all(), k
        assert (got["doc_ids"] == b["seg"]).all(), k
        assert (got["loss_mask"] == (b["tgt"] >= 0)).all(), k


def test_worker_positions_cover_every_row_once():
    n = 103
    for world, workers in ((1, 1), (2, 3), (4, 2)):
        seen = []
        for r in range(world):
            for w in range(workers):
                seen += list(data.worker_positions(n, r, world, w, workers, epoch=1))
        assert sorted(seen) == list(range(n, 2 * n))


def test_torch_datasets(shard_sets):
    torch = pytest.importorskip("torch", reason="PyTorch not installed: mkshards.torch not tested")
    import mkshards.torch as mt
    d = shard_sets["plain"]
    ds = mt.ShardDataset(d, seq_len=96)
    ss = ds.set
    assert len(ds) == ss.rows["train"]
    it = ds[3]
    assert it["input_ids"].dtype == torch.int64 and it["input_ids"].shape == (96,)
    assert it["input_ids"].tolist() == ss[3]["tokens"].astype(int).tolist()
    sampler = mt.TokenBudgetBatchSampler(ds, seq_len=96, token_budget=96 * 4, batch_tokens=96 * 8, seed=3)
    dl = torch.utils.data.DataLoader(ds, sampler=sampler, batch_size=None)
    batches = list(dl)
    assert len(batches) == len(sampler) and all(b["input_ids"].shape[0] <= 4 for b in batches)
    for rows, b in zip(sampler, batches):
        assert (b["input_ids"].numpy() == ss.read(rows, token_dtype=np.uint32)["tokens"]).all()
    dl = torch.utils.data.DataLoader(ds, batch_sampler=sampler)  # __getitems__ + default collate
    assert all((a["labels"] == b["labels"]).all() for a, b in zip(dl, batches))
    # iterable: (rank, world) x workers read every row once
    seen = []
    for rank in range(2):
        itd = mt.ShardIterableDataset(d, rank=rank, world_size=2, shuffle=True, seed=11, verify=False)
        dl = torch.utils.data.DataLoader(itd, batch_size=None, num_workers=2)
        for s in dl:
            seen.append(tuple(s["input_ids"].tolist()))
    want = sorted(tuple(ss[i]["tokens"].astype(int).tolist()) for i in range(len(ss)))
    assert sorted(seen) == want
    itd = mt.ShardIterableDataset(d, batch_rows=5, verify=False)
    b = next(iter(itd))
    assert b["input_ids"].shape == (5, 96)


def test_llm_batch_fields_and_single_rows(shard_sets):
    """fields= selects arrays (the same values as the full layout); one-row reads equal the batched ones, for
    plain and zstd shards and for T < row_len."""
    for kind in ("plain", "zstd"):
        ss = mkshards.ShardSet(shard_sets[kind], verify=False)
        rows = [0, 5, len(ss) - 1, 5]
        for T in (96, 50):
            full = data.llm_batch(ss, rows, T)
            assert list(full) == list(data.FIELDS)
            two = data.llm_batch(ss, rows, T, fields=["labels", "input_ids"])
            assert list(two) == ["input_ids", "labels"]
            assert all((two[k] == full[k]).all() for k in two)
            for j, r in enumerate(rows):
                one = data.llm_batch(ss, r, T)
                assert all((one[k][0] == full[k][j]).all() for k in full)
            # labels: the next token where it carries loss
            ref = ss.read(rows)
            for j in range(len(rows)):
                tok, m = ref["tokens"][j].astype(np.int64), ref["loss_mask"][j]
                want = np.where(m[1:T + 1] == 1, tok[1:T + 1], -100) if T < 96 else \
                    np.append(np.where(m[1:] == 1, tok[1:], -100), -100)
                assert (full["labels"][j] == want).all()
                assert (full["loss_mask"][j] == (want != -100)).all()
        # every row, both doc_mask settings: the layout equals what ShardSet.read (ds_shardset_read) expands
        ref = ss.read(np.arange(len(ss)))
        for T in (96, 31, 1):
            for dm in (True, False):
                got = data.llm_batch(ss, np.arange(len(ss)), T, doc_mask=dm, ignore_index=-7)
                tok = ref["tokens"].astype(np.int64)
                m = ref["loss_mask"]
                nxt = np.concatenate([tok[:, 1:], np.zeros((len(ss), 1), np.int64)], 1)
                ok = np.concatenate([m[:, 1:], np.zeros((len(ss), 1), np.uint8)], 1) == 1
                assert (got["input_ids"] == tok[:, :T]).all(), (kind, T, dm)
                assert (got["labels"] == np.where(ok, nxt, -7)[:, :T]).all(), (kind, T, dm)
                assert (got["loss_mask"] == ok[:, :T]).all(), (kind, T, dm)
                pos = ref["pos_ids"][:, :T] if dm else np.broadcast_to(np.arange(T), (len(ss), T))
                assert (got["position_ids"] == pos).all(), (kind, T, dm)
                assert (got["doc_ids"] == (ref["doc_ids"][:, :T] if dm else 0)).all(), (kind, T, dm)
    with pytest.raises(ValueError):
        data.llm_batch(ss, [0], fields=("tokens",))
    with pytest.raises(ValueError):
        data.llm_batch(ss, [0], fields=())


def test_llm_batch_corrupt_metadata(shard_sets, tmp_path):
    """fill reads the row metadata in place: out-of-range entries (checksums not verified) raise MkshardsError
    naming the row, never read outside the file."""
    import shutil
    import struct
    for what in ("valid", "sidx", "start"):
        d = tmp_path / what
        shutil.copytree(shard_sets["plain"], d)
        shard = sorted(p for p in os.listdir(d) if p.startswith("train-"))[0]
        b = bytearray((d / shard).read_bytes())
        n_rows, n_starts, tok_bytes = struct.unpack_from("<QQQ", b, 48)[0], *struct.unpack_from("<QQ", b, 64)
        meta = 192 + tok_bytes
        if what == "valid":
            struct.pack_into("<I", b, meta + 4 * 2, 10 ** 6)            # row 2: more valid tokens than L
        elif what == "sidx":
            struct.pack_into("<I", b, meta + 4 * n_rows + 4 * 3, 1 << 30)  # row 2's end / row 3's start
        else:
            a = struct.unpack_from("<I", b, meta + 4 * n_rows + 4 * 2)[0]
            struct.pack_into("<I", b, meta + 8 * n_rows + 4 + 4 * a, 10 ** 6)  # a start past valid
        (d / shard).write_bytes(bytes(b))
        ss = mkshards.ShardSet(d, verify=False)
        with pytest.raises(mkshards.MkshardsError, match="train row 2"):
            data.llm_batch(ss, [0, 1, 2])
        assert data.llm_batch(ss, [0, 1])["input_ids"].shape == (2, 96)


def test_torch_fields(shard_sets):
    torch = pytest.importorskip("torch", reason="PyTorch not installed: mkshards.torch not tested")
    import mkshards.torch as mt
    d = shard_sets["plain"]
    full = mt.ShardDataset(d, verify=False)
    two = mt.ShardDataset(d, verify=False, fields=("input_ids", "labels"))
    for i in (0, 3, len(full) - 1, -1):
        a, b, c = full[i], two[i], full[[i]]
        assert list(b) == ["input_ids", "labels"] and a["labels"].dtype == torch.int64
        assert all(torch.equal(a[k], b[k]) for k in b)
        assert all(torch.equal(a[k], c[k][0]) for k in a)
    assert two[np.int64(2)]["input_ids"].shape == (96,)
    with pytest.raises(IndexError):
        full[len(full)]
    rows = list(mt.ShardIterableDataset(d, verify=False, fields=("labels",)))
    assert len(rows) == len(full) and list(rows[0]) == ["labels"]
    assert all(torch.equal(r["labels"], full[i]["labels"]) for i, r in enumerate(rows))
    got = full.__getitems__([4, 1])
    assert torch.equal(got[1]["doc_ids"], full[1]["doc_ids"])


def test_torch_single_row_path(shard_sets):
    """ShardDataset[i] with every field goes through the C row reader (one call per row): every row, plain and zstd
    shards, T < row_len, both doc_mask settings and another ignore_index equal the batched read; negative
    indices count from the end, out-of-range ones raise IndexError, a closed set ValueError."""
    torch = pytest.importorskip("torch", reason="PyTorch not installed: mkshards.torch not tested")
    import mkshards.torch as mt
    for kind in ("plain", "zstd"):
        for T, dm, ig in ((96, True, -100), (31, False, -7), (1, True, 0)):
            ds = mt.ShardDataset(shard_sets[kind], verify=False, seq_len=T, doc_mask=dm, ignore_index=ig)
            n = len(ds)
            ref = ds[np.arange(n)]
            for i in range(-n, n):
                got = ds[i]
                assert list(got) == list(ref) and all(got[k].shape == (T,) for k in got)
                assert all(torch.equal(got[k], ref[k][i % n]) for k in ref), (kind, T, dm, i)
            for bad in (n, -n - 1, 10 ** 12):
                with pytest.raises(IndexError):
                    ds[bad]
            with pytest.raises(ValueError):  # seq_len beyond the rows
                ds.set._c.row_maker("train", 97, dm, ig, np.empty, np.int64, np.bool_, torch.from_numpy, data.FIELDS)
            assert ds[np.int64(1)]["labels"].shape == (T,)  # numpy integers index too
            import pickle  # the C row reader is rebuilt after unpickling (DataLoader workers with spawn)
            ds2 = pickle.loads(pickle.dumps(ds))
            assert all(torch.equal(ds2[-1][k], ds[-1][k]) for k in ds[-1])
            ds.set.close()
            with pytest.raises(ValueError, match="closed"):
                ds[0]
