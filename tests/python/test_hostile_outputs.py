"""Issue 32 items 8 and 10 from Python: every writing entry point refuses the outputs the CLI refuses (one library
check, ds_check_output), and ShardSet(verify=True) runs `mkshards verify`'s checks: a shard whose row metadata or
ids verify refuses, with every checksum recomputed, is refused on open, and its rows by every read."""
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

import mkshards
from conftest import ROOT, SAMPLES, run_cli

sys.path.append(os.path.join(ROOT, "tools", "python"))  # after the installed package
import mkshards_reader  # noqa: E402  (the single-file numpy reader)


def _sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def corpus(mkshards_bin, tmp_path_factory):
    """A folder with one JSONL file, and a small trained tokenizer with its .meta.json sidecar."""
    d = tmp_path_factory.mktemp("hostile_outputs")
    (d / "in").mkdir()
    shutil.copyfile(os.path.join(SAMPLES, "tiny.jsonl"), d / "in" / "a.jsonl")
    tok = d / "tok.tiktoken"
    run_cli(mkshards_bin, "tokenizer", "train", "--vocab-size", "512", "-s", "<|endoftext|>", "-q", "-o", str(tok),
            str(d / "in" / "a.jsonl"))
    assert os.path.exists(str(tok) + ".meta.json")
    return d


def _hist_refused(corpus, svg, tokenizer, want):
    inp = corpus / "in" / "a.jsonl"
    before = {p: _sha(p) for p in (inp, corpus / "tok.tiktoken", str(corpus / "tok.tiktoken") + ".meta.json")}
    with pytest.raises(mkshards.MkshardsError, match=want) as e:
        mkshards.hist(str(corpus / "in"), tokenizer=tokenizer, svg=svg)
    assert e.value.code == -8  # DS_ERR_CONFLICT
    assert {p: _sha(p) for p in before} == before


@pytest.mark.parametrize("tok_kind", ["path", "encoding"])
def test_hist_svg_refuses_every_input(corpus, tok_kind):
    tok = str(corpus / "tok.tiktoken")
    tokenizer = tok if tok_kind == "path" else mkshards.Encoding.from_file(tok)
    _hist_refused(corpus, str(corpus / "in" / "a.jsonl"), tokenizer, "lies inside the input folder")
    _hist_refused(corpus, str(corpus / "in" / "new.svg"), tokenizer, "lies inside the input folder")
    _hist_refused(corpus, tok, tokenizer, "is the same file as the tokenizer file")
    _hist_refused(corpus, tok + ".meta.json", tokenizer, "is the same file as the tokenizer file")
    os.link(tok, corpus / "tok_link")
    try:
        _hist_refused(corpus, str(corpus / "tok_link"), tokenizer, "is the same file as the tokenizer file")
    finally:
        os.unlink(corpus / "tok_link")
    assert not os.path.exists(corpus / "in" / "new.svg")
    ok = corpus / "chart.svg"
    mkshards.hist(str(corpus / "in"), tokenizer=tokenizer, svg=str(ok))
    assert open(ok).read().lstrip().startswith("<")


def test_hist_svg_same_refusal_as_cli(corpus, mkshards_bin):
    """The Python message is the CLI's (one check), the option named as each names it."""
    tok = str(corpus / "tok.tiktoken")
    p = run_cli(mkshards_bin, "hist", "-t", tok, "--svg", tok, str(corpus / "in"), check=False)
    assert p.returncode == 2
    with pytest.raises(mkshards.MkshardsError) as e:
        mkshards.hist(str(corpus / "in"), tokenizer=tok, svg=tok)
    assert str(e.value).replace("svg '", "--svg '", 1) in p.stderr


def test_build_out_refusals(corpus):
    tok = str(corpus / "tok.tiktoken")
    with pytest.raises(mkshards.MkshardsError, match="is the same file as the input"):
        mkshards.build(str(corpus / "in"), str(corpus / "in"), tokenizer=tok, seq_len=64)
    with pytest.raises(mkshards.MkshardsError, match="lies inside the input folder"):
        mkshards.build(str(corpus / "in"), str(corpus / "in" / "out"), tokenizer=tok, seq_len=64)
    assert sorted(os.listdir(corpus / "in")) == ["a.jsonl"]


# ---------------------------------------------------------------- item 10
def _gen(mkshards_bin):
    g = os.path.join(os.path.dirname(os.path.dirname(mkshards_bin)), "tests", "hostile_shards_gen")
    if not os.access(g, os.X_OK):
        pytest.skip(f"no hostile_shards_gen next to {mkshards_bin}")
    return g


def _layout(path):
    b = open(path, "rb").read()
    n, = struct.unpack_from("<Q", b, 48)
    L, = struct.unpack_from("<I", b, 24)
    tb, = struct.unpack_from("<Q", b, 72)
    v0 = 192 + tb
    s0 = v0 + 4 * n
    return b, n, L, v0, s0, s0 + 4 * (n + 1)


@pytest.fixture()
def bad_sets(mkshards_bin, corpus, tmp_path):
    """Two sets built by the CLI, each with one row verify refuses and every checksum (and the manifest's xxh3)
    recomputed: 'starts' (a document start repeated), 'ids' (an id beyond the vocabulary). {kind: (dir, row)}"""
    gen = _gen(mkshards_bin)
    out = {}
    for kind in ("starts", "ids"):
        d = tmp_path / kind
        run_cli(mkshards_bin, "build", "-q", "-t", str(corpus / "tok.tiktoken"), "-L", "1024", "--no-shuffle", "-o",
                str(d), str(corpus / "in"))
        shard = str(d / "train-00000.mks")
        b, n, L, v0, s0, st0 = _layout(shard)
        sidx = struct.unpack_from("<%dI" % (n + 1), b, s0)
        row = next(r for r in range(n) if sidx[r + 1] - sidx[r] >= 2)
        if kind == "starts":
            off, val = st0 + 4 * (sidx[row] + 1), struct.unpack_from("<I", b, st0 + 4 * sidx[row])[0]
            width = 4
        else:
            off, val, width = 192 + 2 * (row * L + 1), 0xFFFF, 4  # u16 ids: bytes of ids 1 and 2
            val = 0xFFFF | (struct.unpack_from("<H", b, off + 2)[0] << 16)
        subprocess.run([gen, "patch", shard, str(off), str(width), str(val), "payload"], check=True)
        subprocess.run([gen, "rehash", str(d)], check=True)
        assert run_cli(mkshards_bin, "verify", str(d), check=False).returncode == 2
        out[kind] = (str(d), row)
    return out


@pytest.mark.parametrize("kind,want", [("starts", "document start .* invalid"),
                                       ("ids", "token id 65535 is outside the vocabulary")])
def test_shardset_verify_is_mkshards_verify(bad_sets, mkshards_bin, kind, want):
    d, row = bad_sets[kind]
    cli = run_cli(mkshards_bin, "verify", d, check=False).stderr
    with pytest.raises(mkshards.MkshardsError, match=want) as e:
        mkshards.ShardSet(d)  # verify=True
    assert str(e.value) in cli  # the same first problem, the same words
    # without verification the set opens, but no read hands the row out, and each says what is wrong as verify
    # does: the shard, the byte offset and the row (issue 32 item 15: it said "train row N: unknown input kind")
    shard = os.path.join(d, "train-00000.mks")
    said = rf"^train row {row}: {re.escape(shard)}: (offset \d+: )?row {row}:? .*{want}"
    ss = mkshards.ShardSet(d, verify=False)
    reads = [lambda: ss.row(row),
             lambda: ss.read([row], tokens=(kind == "ids"), pos_ids=False, doc_ids=(kind == "starts"),
                             loss_mask=False),
             lambda: mkshards.data.llm_batch(ss, [row], doc_mask=True)]
    if kind == "ids":  # without the document layout only the ids are used
        reads.append(lambda: mkshards.data.llm_batch(ss, [row], doc_mask=False, fields=("input_ids", "labels")))
    for read in reads:
        with pytest.raises(mkshards.MkshardsError) as e:
            read()
        assert re.search(said, str(e.value)), str(e.value)
        assert "unknown input kind" not in str(e.value) and e.value.code == -3
    others = [r for r in range(min(len(ss), 8)) if r != row]
    assert len(ss.read(others)["tokens"]) == len(others)
    ss.close()
    # the numpy-only reader makes the same checks with the same words (issue 32 item 17)
    ref = mkshards_reader.ShardSet(d)
    with pytest.raises(mkshards_reader.ShardError) as e:
        ref.row(row)
    assert str(e.value) in cli, (str(e.value), cli)
