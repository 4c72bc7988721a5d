"""Issue 32 items 15-17 from Python: errors that say what is wrong, numbers that are refused instead of wrapped, and
a numpy-only reader that neither blocks on a FIFO nor hands out rows `mkshards verify` refuses.

15. decode of an id the vocabulary lacks names the id as given (np.uint64(2**32 + 464) said "token id -1");
    corrupt row metadata names the shard, offset and row (test_hostile_outputs.py, it said "unknown input kind").
16. every integer argument is checked against its CLI option's range: seq_len=2**32 + 64 built L=64,
    part=(2**32 + 1, 2**32 + 2) built part 1/2, seed=-1 built with 2**64 - 1, and a seed of 2**64 - 1 (valid for
    --seed) was recorded in the manifest as -1.
17. tools/python/mkshards_reader.py opened a FIFO shard or manifest with open() and blocked forever.
"""
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import mkshards
from conftest import ROOT, SAMPLES, run_cli

READER_DIR = os.path.join(ROOT, "tools", "python")
sys.path.append(READER_DIR)  # after site-packages: tools/python/mkshards (no _core) must not shadow the package
import mkshards_reader  # noqa: E402  (the single-file numpy reader)

TINY = os.path.join(SAMPLES, "tiny.jsonl")
U64_MAX = 2**64 - 1


# ---------------------------------------------------------------- item 15: ids as given
@pytest.mark.parametrize("ids,text,index", [
    (np.uint64(2**32 + 464), "4294967760", 0),              # a numpy scalar (was "token id -1")
    (np.array([5, 2**32 + 464], np.uint64), "4294967760", 1),
    ([np.uint64(2**32 + 464)], "4294967760", 0),             # was TypeError "an integer is required"
    ([2**32 + 464], "4294967760", 0),                        # was "token id at index 0 is not a valid id"
    ([7, -1], "-1", 1),
    (np.array([-3], np.int64), "-3", 0),
    ([np.int64(-2)], "-2", 0),
    ([2**70], str(2**70), 0),
    ([10**5000], "(an integer of 16610 bits)", 0),           # str() of it would raise
    ([50257], "50257", 0),                                   # n_vocab itself
])
def test_decode_names_the_id_as_given(shared, ids, text, index):
    enc = mkshards.get_encoding("gpt2")
    want = f"decode: token id {text} (index {index}) is not in the vocabulary (ids 0..50256)"
    for f in (enc.decode, enc.decode_bytes):
        with pytest.raises(mkshards.MkshardsError) as e:
            f(ids)
        assert str(e.value) == want and isinstance(e.value, ValueError) and e.value.code == -7  # TK_ERR_RANGE
    with pytest.raises(mkshards.MkshardsError, match="token id"):
        enc.decode_batch([[1], ids])


def test_decode_unused_id_and_single_tokens(shared):
    enc = mkshards.get_encoding("cl100k_base")
    with pytest.raises(mkshards.MkshardsError) as e:
        enc.decode([1, 100261])
    assert str(e.value) == ("decode: token id 100261 (index 1) is not in the vocabulary (ids 0..100276; this one "
                            "is unused)")
    # decode_single_token_bytes: tiktoken's exceptions (KeyError for an unknown id that fits 32 bits, OverflowError
    # for a negative or larger one; both MkshardsError too) with the same words
    for tok, text in ((-1, "-1"), (2**32 + 464, "4294967760"), (np.uint64(2**32 + 5), "4294967301"),
                      (100277, "100277"), (2**70, str(2**70))):
        with pytest.raises(KeyError if text == "100277" else OverflowError) as e:
            enc.decode_single_token_bytes(tok)
        assert isinstance(e.value, mkshards.MkshardsError)
        assert e.value.args[0] == f"token id {text} is not in the vocabulary (ids 0..100276)"
    with pytest.raises(TypeError, match="an integer, not float"):
        enc.decode_single_token_bytes(1.0)
    with pytest.raises(TypeError, match="index 1: an integer, not float"):
        enc.decode([1, 2.0])
    # numpy integers in a list, and arrays that are not contiguous, are ids like any other
    assert enc.decode([np.uint64(9906), np.int32(1917)]) == enc.decode([9906, 1917])
    assert enc.decode(np.array([9906, 0, 1917])[::2]) == enc.decode([9906, 1917])
    assert enc.decode_single_token_bytes(np.uint64(9906)) == enc.decode_single_token_bytes(9906)


# ---------------------------------------------------------------- item 16: numbers refused, not wrapped
def _refused(out, exc, match, **kw):
    args = dict(tokenizer="gpt2", seq_len=64)
    args.update(kw)
    with pytest.raises(exc, match=match):
        mkshards.build([TINY], str(out), **args)
    assert not os.path.exists(out), "refused before anything was written"


@pytest.mark.parametrize("kw,match", [
    (dict(seq_len=2**32 + 64), r"^seq_len 4294967360: must be 1\.\.16777216$"),  # built L=64
    (dict(seq_len=2**64 + 64), r"^seq_len 18446744073709551680: must be"),
    (dict(seq_len=0), r"^seq_len 0: must be 1\.\.16777216$"),
    (dict(seq_len=-64), r"^seq_len -64: must be"),
    (dict(seq_len=64.5), r"^seq_len 64\.5: must be an integer$"),
    (dict(part=(2**32 + 1, 2**32 + 2)), r"^part K 4294967297: must be 1\.\.1000000$"),  # built part 1/2
    (dict(part="4294967297/4294967298"), r"^part K 4294967297: must be"),
    (dict(part=(1, 2**32 + 2)), r"^part N 4294967298: must be"),
    (dict(part=(3, 2)), r"^part 3/2: K must be 1\.\.N"),
    (dict(part="1/-2"), r"^part '1/-2': 'K/N'"),
    (dict(seed=-1), r"^seed -1: must be 0\.\.18446744073709551615$"),  # built with seed 2**64 - 1
    (dict(seed=2**64), r"^seed 18446744073709551616: must be"),       # built with seed 0
    (dict(threads=-1), r"^threads -1: must be 1\.\.256 \(or 0: all cores\)$"),
    (dict(threads=2**32 + 2), r"^threads 4294967298: must be"),
    (dict(bfd_window=2**64 + 1, pack="bfd"), r"^bfd_window 18446744073709551617: must be"),
    (dict(shard_tokens=-5), r"^shard_tokens -5: must be"),
    (dict(zstd=2**32 + 3), r"^zstd 4294967299: must be 0\.\.22$"),
    (dict(frame_rows=2**32 + 8, zstd=3), r"^frame_rows 4294967304: must be"),
    (dict(batch_bytes=-1), r"^batch_bytes -1: must be"),
    (dict(val_fraction=float("nan")), r"^val_fraction nan: must be a number with 0 <= x < 1$"),
    (dict(val_fraction=1.0), r"^val_fraction 1: must be"),
    (dict(checkpoint_seconds=float("inf")), r"^checkpoint_seconds inf: must be"),
    (dict(checkpoint_seconds=-1), r"^checkpoint_seconds -1: must be"),
])
def test_build_numbers_refused(shared, tmp_path, kw, match):
    _refused(tmp_path / "out", ValueError, match, **kw)


def test_build_non_numbers(shared, tmp_path):
    _refused(tmp_path / "out", TypeError, r"^seq_len: an integer, not str$", seq_len="64")
    _refused(tmp_path / "out", TypeError, r"^part: 'K/N' or a pair", part=3)


def test_seed_full_range_recorded_exactly(shared, mkshards_bin, tmp_path):
    """A seed of 2**64 - 1 (valid for --seed) is recorded as itself, by build() and by the CLI, and the two are
    the same build byte for byte; the set verifies, and a second build is up to date."""
    res = mkshards.build([TINY], str(tmp_path / "py"), tokenizer="gpt2", seq_len=64, seed=U64_MAX)
    assert int(res["manifest"]["config"]["seed"]) == U64_MAX
    run_cli(mkshards_bin, "build", "-q", "-t", "gpt2", "-L", "64", "--seed", str(U64_MAX), "-o",
            str(tmp_path / "cli"), TINY)
    for d in ("py", "cli"):
        text = open(tmp_path / d / "manifest.json").read()
        assert '"seed": "18446744073709551615"' in text, d  # was "seed": -1
        run_cli(mkshards_bin, "verify", str(tmp_path / d))
        assert "seed 18446744073709551615" in run_cli(mkshards_bin, "inspect", str(tmp_path / d)).stdout
    for f in ("train-00000.mks", "manifest.json"):
        assert open(tmp_path / "py" / f, "rb").read() == open(tmp_path / "cli" / f, "rb").read(), f
    again = mkshards.build([TINY], str(tmp_path / "py"), tokenizer="gpt2", seq_len=64, seed=U64_MAX)
    assert again["up_to_date"]
    # seeds below 2**63 stay JSON integers
    res = mkshards.build([TINY], str(tmp_path / "small"), tokenizer="gpt2", seq_len=64, seed=2**63 - 1)
    assert res["manifest"]["config"]["seed"] == 2**63 - 1
    # the reader: the old negative form still means 2**64 - 1; a string is a uint64 of 2**63 or more, nothing else
    mp = tmp_path / "cli" / "manifest.json"
    text = open(mp).read()
    for seed, said in (("-1", "seed 18446744073709551615"), ('"9223372036854775808"', "seed 9223372036854775808"),
                       ('"18446744073709551616"', "config.seed must be"), ('"123"', "config.seed must be"),
                       ('"-1"', "config.seed must be"), ('" 9223372036854775808"', "config.seed must be")):
        open(mp, "w").write(text.replace('"seed": "18446744073709551615"', f'"seed": {seed}'))
        p = run_cli(mkshards_bin, "inspect", str(tmp_path / "cli"), check=False)
        assert said in p.stdout + p.stderr and p.returncode == (0 if said.startswith("seed") else 2), (seed, p)


@pytest.mark.parametrize("kw,match", [
    (dict(seq_len=2**32 + 2048), r"^seq_len 4294969344: must be 1\.\.1073741824 \(or 0: the default\)$"),
    (dict(seq_len=-1), r"^seq_len -1: must be"),
    (dict(threads=2**32 + 1), r"^threads 4294967297: must be 1\.\.256"),
    (dict(max_examples=-1), r"^max_examples -1: must be 0\.\.100000 \(or None: the default\)$"),
    (dict(max_examples=2**64), r"^max_examples 18446744073709551616: must be"),
    (dict(max_doc_bytes=-1), r"^max_doc_bytes -1: must be"),
    (dict(max_record_bytes=2**64 + 5), r"^max_record_bytes 18446744073709551621: must be"),
    (dict(long_run_bytes=-2), r"^long_run_bytes -2: must be"),
    (dict(long_line_bytes=2**40 + 1), r"^long_line_bytes 1099511627777: must be"),
    (dict(outlier_factor=float("nan")), r"^outlier_factor nan: must be"),
    (dict(min_bytes_per_token=-1), r"^min_bytes_per_token -1: must be"),
])
def test_lint_numbers_refused(shared, kw, match):
    with pytest.raises(ValueError, match=match):
        mkshards.lint([TINY], tokenizer="gpt2", **kw)


def test_hist_and_encode_numbers_refused(shared, tmp_path):
    with pytest.raises(ValueError, match=r"^seq_len 4294969344: must be"):
        mkshards.hist([TINY], tokenizer="gpt2", seq_len=2**32 + 2048, svg=str(tmp_path / "h.svg"))
    assert not os.path.exists(tmp_path / "h.svg")
    enc = mkshards.get_encoding("gpt2")
    for n, match in ((-1, r"^num_threads -1: must be 1\.\.4096 \(or 0: all cores\)$"),
                     (2**32 + 1, r"^num_threads 4294967297: must be"), (1.5, r"^num_threads 1\.5: must be an integer")):
        with pytest.raises(ValueError, match=match):
            enc.encode_ordinary_batch(["a", "b"], num_threads=n)
    assert enc.encode_ordinary_batch(["a", "b"], num_threads=2.0) == [[64], [65]]


def test_row_order_numbers_refused():
    ro = mkshards.data.row_order
    for args, match in (((2**64, 1, 10), r"^start 18446744073709551616: must be"),
                        ((-1, 1, 10), r"^start -1: must be"),
                        ((0, -1, 10), r"^count -1: must be 0\.\.1099511627776$"),
                        ((0, 1, 0), r"^n_rows 0: must be 1\.\."),
                        ((0, 1, 2**64), r"^n_rows 18446744073709551616: must be"),
                        ((U64_MAX, 2, 10), r"^start 18446744073709551615 \+ count 2: beyond the last")):
        with pytest.raises(ValueError, match=match):
            ro(*args)
    for seed in (-1, 2**64):
        with pytest.raises(ValueError, match=rf"^seed {seed}: must be 0\.\.18446744073709551615$"):
            ro(0, 4, 10, seed=seed)
        with pytest.raises(ValueError, match=rf"^seed {seed}: must be"):
            mkshards.data.TokenBudgetBatches(10, 8, seed=seed)  # at construction, not at the first batch
    # the whole uint64 range of llmtrain --seed is a seed, the last position is a position
    assert len(ro(0, 4, 10, seed=U64_MAX)) == 4 and len(ro(U64_MAX, 1, 10)) == 1
    assert len(ro(0, 0, 10)) == 0


def test_rows_and_batch_numbers(shard_sets):
    ss = mkshards.ShardSet(shard_sets["plain"])
    n = ss.rows["train"]
    # a uint64 row 2**64 - 1 was cast to -1: "row -1 out of range" for read, the last row for llm_batch
    for rows in (np.array([U64_MAX], np.uint64), [U64_MAX], [2**64]):
        v = rows[0]
        with pytest.raises(IndexError, match=rf"^row {int(v)} out of range: the train split has {n} rows$"):
            ss.read(rows)
        with pytest.raises(IndexError, match=rf"^row {int(v)} out of range"):
            mkshards.data.llm_batch(ss, rows)
    with pytest.raises(IndexError, match=rf"^row {2**64}: the train split has {n} rows$"):
        ss._c.row_maker("train", 8, True, -100, np.empty, np.int64, np.bool_, np.asarray,
                        mkshards.data.FIELDS).row(2**64)
    with pytest.raises(TypeError, match="rows: integers, not float64"):
        mkshards.data.llm_batch(ss, np.array([1.5]))
    with pytest.raises(TypeError):
        ss.row(1.5)  # was row 1
    with pytest.raises(ValueError, match=r"^seq_len 4294967304: must be 1\.\.96"):
        mkshards.data.llm_batch(ss, [0], 2**32 + 8)
    with pytest.raises(ValueError, match=r"^ignore_index 9223372036854775808: must be -2\^63\.\.2\^63-1$"):
        mkshards.data.llm_batch(ss, [0], ignore_index=2**63)
    labels = np.empty((1, 8), np.int32)  # int32 labels cannot hold an ignore_index beyond 32 bits
    with pytest.raises(ValueError, match=r"^ignore_index 4294967296: int32 labels hold"):
        ss._c.fill("train", 0, 8, True, 2**32, None, labels, None, None, None)
    assert mkshards.data.llm_batch(ss, np.array([0, n - 1], np.uint64))["input_ids"].shape == (2, 96)


# ---------------------------------------------------------------- item 17: FIFOs, promptly
def _run_with_timeout(code, timeout=30):
    """code in a child Python (the package and the reader importable); (returncode, output, seconds)."""
    code = f"import sys; sys.path.append({READER_DIR!r})\n" + code
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"blocked: no answer in {timeout} s")
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def _fifo_in_place(path):
    os.rename(path, str(path) + ".moved")
    os.mkfifo(path)


def test_numpy_reader_refuses_fifos_promptly(shard_sets, tmp_path):
    for victim in ("train-00000.mks", "manifest.json"):
        d = tmp_path / victim
        shutil.copytree(shard_sets["plain"], d)
        _fifo_in_place(d / victim)
        rc, out, dt = _run_with_timeout(f"""
import mkshards_reader
try:
    mkshards_reader.ShardSet({str(d)!r})
except mkshards_reader.ShardError as e:
    print("refused:", e)
""")
        assert rc == 0 and f"refused: {d / victim}: not a regular file" in out, out
        assert dt < 20, dt
    rc, out, _ = _run_with_timeout(f"""
import mkshards_reader
try:
    mkshards_reader.Shard({str(tmp_path / "train-00000.mks" / "train-00000.mks")!r})
except mkshards_reader.ShardError as e:
    print("refused:", e)
""")
    assert rc == 0 and "not a regular file (a shard must be one)" in out, out


def test_package_refuses_a_fifo_swapped_in_after_open(shard_sets, tmp_path):
    """ShardSet maps a shard's tokens lazily (shard_tokens, ShardSet.row): a FIFO that took the shard's name after
    the set was opened made np.memmap block."""
    d = tmp_path / "s"
    shutil.copytree(shard_sets["plain"], d)
    rc, out, _ = _run_with_timeout(f"""
import os, mkshards
ss = mkshards.ShardSet({str(d)!r}, verify=False)
p = os.path.join({str(d)!r}, "train-00000.mks")
os.rename(p, p + ".moved"); os.mkfifo(p)
try:
    ss.shard_tokens(0)
except mkshards.MkshardsError as e:
    print("refused:", e)
""")
    assert rc == 0 and "refused:" in out and "not a regular file" in out, out


# ---------------------------------------------------------------- item 17: the reader's checks
def _patch(path, off, fmt, value):
    b = bytearray(open(path, "rb").read())
    struct.pack_into(fmt, b, off, value)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    open(path, "wb").write(bytes(b))


def _layout(path):
    b = open(path, "rb").read()
    n, = struct.unpack_from("<Q", b, 48)
    L, = struct.unpack_from("<I", b, 24)
    dt, = struct.unpack_from("<I", b, 16)
    tb, = struct.unpack_from("<Q", b, 72)
    v0 = 192 + tb
    s0 = v0 + 4 * n
    st0 = s0 + 4 * (n + 1)
    sidx = struct.unpack_from("<%dI" % (n + 1), b, s0)
    return n, L, dt, v0, s0, st0, sidx


@pytest.fixture()
def copy_set(shard_sets, tmp_path):
    def make(kind="plain"):
        d = tmp_path / kind
        if not d.exists():
            shutil.copytree(shard_sets[kind], d)
        return d
    return make


def test_numpy_reader_header_checks(copy_set):
    d = copy_set()
    sh = d / "train-00000.mks"
    _patch(sh, 16, "<I", 3)
    with pytest.raises(mkshards_reader.ShardError, match=r"train-00000.mks: offset 16: dtype bytes 3 \(must be 2 or 4\)"):
        mkshards_reader.ShardSet(str(d))
    _patch(sh, 16, "<I", 2)
    _patch(sh, 32, "<I", 60000)  # pad id beyond the vocabulary
    with pytest.raises(mkshards_reader.ShardError, match=r"offset 32: pad id 60000 >= vocab size 50257"):
        mkshards_reader.ShardSet(str(d))
    _patch(sh, 32, "<I", 50256)
    with open(sh, "ab") as f:
        f.write(b"x")
    with pytest.raises(mkshards_reader.ShardError, match=r"file size \d+, header says \d+ \(trailing bytes\)"):
        mkshards_reader.ShardSet(str(d))


def test_numpy_reader_manifest_checks(copy_set):
    d = copy_set()
    mp = d / "manifest.json"
    m = json.load(open(mp))
    text = open(mp).read()
    for bad, match in (({**m, "shards": [{**m["shards"][0], "file": "../x.mks"}] + m["shards"][1:]},
                        r"shards\[0\].file '../x.mks' is not a plain file name: holds '/'"),
                       ({**m, "shards": m["shards"] + m["shards"][:1]}, "is listed twice"),
                       ({**m, "seq_len": 2**32 + 96}, r'"seq_len" must be an integer 1\.\.16777216'),
                       ({**m, "tokenizer": {**m["tokenizer"], "pad_id": -1}}, "tokenizer.pad_id")):
        os.chmod(mp, 0o644)
        json.dump(bad, open(mp, "w"))
        with pytest.raises(mkshards_reader.ShardError, match=match):
            mkshards_reader.ShardSet(str(d))
    open(mp, "w").write(text.replace('{', '{"format": "x", ', 1))  # a duplicate key
    with pytest.raises(mkshards_reader.ShardError, match="duplicate key 'format'"):
        mkshards_reader.ShardSet(str(d))


def test_numpy_reader_row_checks(copy_set):
    """Each of verify's row checks, on bytes patched without fixing any checksum (the reader has no XXH3): the
    row is refused with the shard, the byte offset and the row; the other rows still read."""
    d = copy_set()
    sh = str(d / "train-00000.mks")
    n, L, dt, v0, s0, st0, sidx = _layout(sh)
    r = next(i for i in range(n) if sidx[i + 1] - sidx[i] >= 2)
    orig = open(sh, "rb").read()
    nv = struct.unpack_from("<I", orig, v0 + 4 * r)[0]
    cases = [
        (v0 + 4 * r, "<I", L + 1, rf"offset {v0 + 4 * r}: row {r} claims {L + 1} valid tokens > row length {L}"),
        (s0 + 4 * (r + 1), "<I", 2**32 - 1, rf"row {r} document-start index out of order"),
        (st0 + 4 * (sidx[r] + 1), "<I", struct.unpack_from("<I", orig, st0 + 4 * sidx[r])[0],
         rf"offset {st0 + 4 * (sidx[r] + 1)}: row {r} document start \d+ invalid"),
        (192 + (r * L + 1) * dt, "<H", 65535, rf"row {r} position 1: token id 65535 is outside the vocabulary of 50257"),
    ]
    if nv < L:  # a padding position that does not hold the pad id
        cases.append((192 + (r * L + L - 1) * dt, "<H", 7, rf"row {r} position {L - 1}: token id 7 is padding that is "
                      "not the pad id, 50256"))
    for off, fmt, val, match in cases:
        os.chmod(sh, 0o644)
        open(sh, "wb").write(orig)
        _patch(sh, off, fmt, val)
        ref = mkshards_reader.ShardSet(str(d))
        with pytest.raises(mkshards_reader.ShardError, match=match) as e:
            ref.row(r)
        assert str(e.value).startswith(sh + ": ")
        ok = r - 1 if r > 0 else r + 2  # a row whose entries were not touched (row r + 1 shares sidx[r + 1])
        assert len(ref.row(ok)["tokens"]) == L


def test_numpy_reader_zstd_frame_checked(copy_set):
    pytest.importorskip("zstandard", reason="zstandard not installed: compressed shards not read")
    d = copy_set("zstd")
    sh = str(d / "train-00000.mks")
    b = open(sh, "rb").read()
    n, = struct.unpack_from("<Q", b, 48)
    ns, = struct.unpack_from("<Q", b, 64)
    tb, = struct.unpack_from("<Q", b, 72)
    foff = 192 + tb + 4 * (2 * n + 1 + ns)
    ref = mkshards_reader.ShardSet(str(d))
    assert len(ref.row(0)["tokens"]) == 96
    _patch(sh, foff + 8, "<Q", tb + 1)  # frame 0 ends beyond the token section
    ref = mkshards_reader.ShardSet(str(d))
    with pytest.raises(mkshards_reader.ShardError, match=r"row 0: zstd frame 0 does not decode"):
        ref.row(0)
