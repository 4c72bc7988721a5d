"""mkshards.build / lint / hist from a Python source (an iterable of str or dicts, Arrow data, a Hugging Face
dataset) instead of files: the same C pipeline, so the same shard bytes and reports as the same documents written
to JSONL and given to the CLI; the iterator's exceptions propagate unchanged; bad items are rejects."""
import hashlib
import json
import os

import pytest

import mkshards
from conftest import run_cli

# documents that exercise the JSON decoding the JSONL path does: non-ASCII, a surrogate pair and a lone
# surrogate (a str Python can hold; json.dumps writes \\ud83d\\ude00 / \\ud800 and the reader pairs / replaces)
DOCS = [("doc %d: " % i) + "the quick brown fox " * (i % 13 + 1) + ("caf\u00e9 \u4e2d\u6587" if i % 5 == 0 else "")
        for i in range(2500)]
DOCS += ["pair \ud83d\ude00 end", "lone \ud800 end", ""]
ROWS = [{"id": i, "meta": {"body": d}} for i, d in enumerate(DOCS)]
BAD = [{"meta": {"other": 1}}, {"meta": None}, {"meta": {"body": None}}, {"meta": {"body": 5}}, {"x": 1},
       {"meta": {"body": ["a"]}}]
OPTS = dict(tokenizer="gpt2", seq_len=64, pack="bfd", val_fraction=0.2, shard_tokens=8192, seed=3, threads=2)
CLI_OPTS = ["-t", "gpt2", "-L", "64", "--pack", "bfd", "--val-fraction", "0.2", "--shard-tokens", "8192",
            "--seed", "3", "-j", "2"]


def write_jsonl(path, rows):
    with open(path, "w", encoding="ascii") as f:  # json.dumps escapes everything: surrogates survive
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return str(path)


def shard_files(d):
    """File name -> sha256 of the shards and rejects (the manifest names the inputs, so it is compared apart)."""
    return {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
            for f in sorted(os.listdir(d)) if f.endswith(".mks")}


def same_build(py_dir, cli_dir):
    assert shard_files(py_dir) == shard_files(cli_dir) and shard_files(py_dir)
    mp = json.load(open(os.path.join(py_dir, "manifest.json")))
    mc = json.load(open(os.path.join(cli_dir, "manifest.json")))
    assert mp["shards"] == mc["shards"]  # per-shard digests, rows, tokens
    # bytes_in / rejected_bytes count the input's raw bytes: the JSONL lines there, the documents' UTF-8 here
    # (a rejected item has none)
    ap, ac = dict(mp["accounting"]), dict(mc["accounting"])
    assert ap.pop("bytes_in") < ac.pop("bytes_in")
    assert ap.pop("rejected_bytes") == 0
    ac.pop("rejected_bytes")
    assert ap == ac
    assert mp["config"]["inputs"] == [] and mp["config"]["files"] == []
    cfg_p = {k: v for k, v in mp["config"].items() if k not in ("inputs", "files", "file_bytes")}
    cfg_c = {k: v for k, v in mc["config"].items() if k not in ("inputs", "files", "file_bytes")}
    assert cfg_p == cfg_c
    rp = [json.loads(x) for x in open(os.path.join(py_dir, "rejects.jsonl"))]
    rc = [json.loads(x) for x in open(os.path.join(cli_dir, "rejects.jsonl"))]
    assert len(rp) == len(rc)
    for a, b in zip(rp, rc):
        assert a.pop("file") == "<python>"
        b.pop("file")
        a.pop("offset", None), b.pop("offset", None)
        assert a.pop("bytes") == 0  # the raw record's size: an item has none
        b.pop("bytes")
        assert a == b


def test_str_iterable_same_bytes_as_cli(shared, mkshards_bin, tmp_path):
    j = write_jsonl(tmp_path / "d.jsonl", [{"text": d} for d in DOCS])
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "cli"), j)
    res = mkshards.build(iter(DOCS), tmp_path / "list", **OPTS)
    assert not res["up_to_date"] and not res["resumed"]
    same_build(tmp_path / "list", tmp_path / "cli")
    # a generator, one thread, a tiny batch (many pipeline batches): the same bytes
    mkshards.build((d for d in DOCS), tmp_path / "gen", **{**OPTS, "threads": 1}, batch_bytes=4096)
    same_build(tmp_path / "gen", tmp_path / "cli")
    # never "up to date": the source may differ each time
    assert not mkshards.build(iter(DOCS), tmp_path / "list", **OPTS)["up_to_date"]
    same_build(tmp_path / "list", tmp_path / "cli")


def test_dicts_dotted_field_and_rejects_same_as_cli(shared, mkshards_bin, tmp_path):
    rows = ROWS[:1000] + BAD + ROWS[1000:]
    j = write_jsonl(tmp_path / "d.jsonl", rows)
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "--field", "meta.body", "-o", str(tmp_path / "cli"), j)
    mkshards.build(rows, tmp_path / "py", field="meta.body", **OPTS)  # a list of dicts needs no iter()
    same_build(tmp_path / "py", tmp_path / "cli")
    acc = json.load(open(tmp_path / "py" / "manifest.json"))["accounting"]
    assert acc["reject_reasons"]["field-missing"] == 3 and acc["reject_reasons"]["field-not-string"] == 3
    rej = [json.loads(x) for x in open(tmp_path / "py" / "rejects.jsonl")]
    assert [r["line"] for r in rej] == [1001, 1002, 1003, 1004, 1005, 1006]


def test_non_str_items_are_rejects(shared, tmp_path):
    items = ["good one", None, 7, b"bytes", "good two", {"text": "from a dict"}, {"text": 1.5}]
    res = mkshards.build(iter(items), tmp_path / "o", tokenizer="gpt2", seq_len=32)
    acc = res["manifest"]["accounting"]
    assert acc["records"] == 7 and acc["documents"]["rejected"] == 4 and acc["documents"]["whole"] == 3
    assert acc["reject_reasons"]["field-not-string"] == 4
    rej = [json.loads(x) for x in open(tmp_path / "o" / "rejects.jsonl")]
    assert [(r["file"], r["line"]) for r in rej] == [("<python>", 2), ("<python>", 3), ("<python>", 4),
                                                     ("<python>", 7)]
    assert "null" in json.dumps(rej[0]) and "number" in json.dumps(rej[1])


def test_lint_and_hist_same_as_cli(shared, mkshards_bin, tmp_path):
    rows = ROWS[:700] + BAD + ROWS[700:1500]
    j = write_jsonl(tmp_path / "d.jsonl", rows)
    p = run_cli(mkshards_bin, "lint", "-t", "gpt2", "-L", "64", "-j", "2", "--field", "meta.body", "--json", j,
                check=False)
    assert p.returncode == 2, p.stderr
    want = json.loads(p.stdout)
    got = mkshards.lint(iter(rows), tokenizer="gpt2", seq_len=64, threads=2, field="meta.body")
    for f in want["findings"] + got["findings"]:  # apart from where: the file name and byte offset
        for ex in f["examples"]:
            ex.pop("file"), ex.pop("offset")
    assert got == want and mkshards.lint_exit_code(got) == 2
    p = run_cli(mkshards_bin, "hist", "-t", "gpt2", "-L", "64", "--field", "meta.body", "--json", j)
    assert mkshards.hist(iter(rows), tokenizer="gpt2", seq_len=64, field="meta.body") == json.loads(p.stdout)


def test_iterator_exception_propagates_unchanged(shared, tmp_path):
    boom = KeyError("boom at 1500")

    def gen():
        for i, d in enumerate(DOCS):
            if i == 1500:
                raise boom
            yield d

    with pytest.raises(KeyError) as ei:
        mkshards.build(gen(), tmp_path / "o", tokenizer="gpt2", seq_len=64, batch_bytes=4096)
    assert ei.value is boom
    assert not (tmp_path / "o" / "manifest.json").exists()
    with pytest.raises(KeyError) as ei:
        mkshards.lint(gen(), tokenizer="gpt2")
    assert ei.value is boom
    with pytest.raises(KeyError):
        mkshards.hist(gen(), tokenizer="gpt2")


def test_streams_without_materialising(shared, tmp_path):
    pulled = [0]
    n = 200_000

    def gen():
        for i in range(n):
            pulled[0] += 1
            yield "document number %d with some words" % i

    at_first = []

    def progress(ev):
        if ev.get("event") == "progress" and not at_first:
            at_first.append(pulled[0])

    res = mkshards.build(gen(), tmp_path / "o", tokenizer="gpt2", seq_len=64, batch_bytes=1 << 16,
                         progress=progress, threads=1)
    assert res["manifest"]["accounting"]["records"] == n
    # at the first batch the reader had pulled about two batches plus one chunk, not the whole generator
    assert at_first and at_first[0] < 10_000, at_first


def test_refusals(shared, tmp_path):
    with pytest.raises(ValueError, match="part"):
        mkshards.build(iter(DOCS), tmp_path / "o", tokenizer="gpt2", seq_len=64, part="1/2")
    with pytest.raises(ValueError, match="resumed"):
        mkshards.build(iter(DOCS), tmp_path / "o", tokenizer="gpt2", seq_len=64, checkpoint_seconds=1)
    with pytest.raises(ValueError, match="empty path component"):
        mkshards.lint(iter(DOCS), field="a..b")
    with pytest.raises(TypeError):
        mkshards.lint(42)
    with pytest.raises(mkshards.MkshardsError):  # everything rejected: no rows, no manifest
        mkshards.build(iter([None, 1]), tmp_path / "o2", tokenizer="gpt2", seq_len=64)
    assert not (tmp_path / "o2" / "manifest.json").exists()
    # a list of str still names files (unchanged): a missing one is an error, not a document
    with pytest.raises(mkshards.MkshardsError):
        mkshards.lint([str(tmp_path / "no-such.jsonl")])


def test_pyarrow_sources_same_as_cli(shared, mkshards_bin, tmp_path):
    pa = pytest.importorskip("pyarrow")
    ok = [d for d in DOCS if not any(0xD800 <= ord(c) <= 0xDFFF for c in d)]  # Arrow strings are UTF-8
    texts = ok[:1200] + [None] + ok[1200:]
    j = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts])
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "cli"), j)
    table = pa.table({"id": list(range(len(texts))), "text": pa.array(texts, pa.large_string())})
    table = pa.concat_tables([table.slice(0, 1000), table.slice(1000)])  # two chunks
    mkshards.build(table, tmp_path / "table", **OPTS)
    same_build(tmp_path / "table", tmp_path / "cli")
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=300))
    mkshards.build(reader, tmp_path / "reader", **OPTS)
    same_build(tmp_path / "reader", tmp_path / "cli")
    ds = pytest.importorskip("pyarrow.dataset")
    mkshards.build(ds.dataset(table), tmp_path / "dataset", **OPTS)
    same_build(tmp_path / "dataset", tmp_path / "cli")
    # a struct column by a dotted field, with a null parent: as the JSONL line {"meta": null}
    rows = ROWS[:500] + [{"id": -1, "meta": None}] + ROWS[500:900]
    jm = write_jsonl(tmp_path / "m.jsonl", rows)
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "--field", "meta.body", "-o", str(tmp_path / "clim"), jm)
    mkshards.build(pa.Table.from_pylist(rows), tmp_path / "struct", field="meta.body", **OPTS)
    same_build(tmp_path / "struct", tmp_path / "clim")
    with pytest.raises(ValueError, match="no column 'body'"):
        mkshards.lint(table, field="body")


def test_hf_datasets_same_as_cli(shared, mkshards_bin, tmp_path):
    datasets = pytest.importorskip("datasets")
    j = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in DOCS[:800]])
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "cli"), j)
    d = datasets.Dataset.from_dict({"text": DOCS[:800]})
    mkshards.build(d, tmp_path / "hf", **OPTS)
    same_build(tmp_path / "hf", tmp_path / "cli")
    mkshards.build(d.to_iterable_dataset(), tmp_path / "hfit", **OPTS)
    same_build(tmp_path / "hfit", tmp_path / "cli")


class _StreamOnly:
    """An object with nothing but the Arrow PyCapsule stream protocol (as polars / DuckDB results have): mkshards
    can only read it through the C stream interface, no pyarrow method or Python object per row."""

    def __init__(self, reader):
        self._reader = reader

    def __arrow_c_stream__(self, requested_schema=None):
        return self._reader.__arrow_c_stream__(requested_schema)


def test_arrow_c_stream_types_and_rejects_same_as_cli(shared, mkshards_bin, tmp_path):
    """Arrow data goes to C as a C stream (zero-copy: the string column's offsets + data read in place): every
    string layout (string, large_string, string_view, dictionary), several batches, nulls and struct paths give
    the CLI's bytes and rejects on the same documents as JSONL."""
    pa = pytest.importorskip("pyarrow")
    if not hasattr(pa.Table, "__arrow_c_stream__"):
        pytest.skip("pyarrow < 14: no PyCapsule stream protocol")
    ok = [d for d in DOCS if not any(0xD800 <= ord(c) <= 0xDFFF for c in d)]
    texts = ok[:900] + [None] + ok[900:1700] + ["the quick brown fox"] * 40  # repeats: a dictionary shares them
    j = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts])
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "cli"), j)
    base = pa.array(texts, pa.string())
    types = {"string": base, "large_string": base.cast(pa.large_string()), "dictionary": base.dictionary_encode()}
    if hasattr(pa, "string_view"):
        types["string_view"] = base.cast(pa.string_view())
    for name, arr in types.items():
        t = pa.table({"id": pa.array(range(len(texts))), "text": arr})
        # sliced batches: each with its own offset into shared buffers
        reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=333))
        mkshards.build(_StreamOnly(reader), tmp_path / name, **OPTS)
        same_build(tmp_path / name, tmp_path / "cli")
    # a struct column by a dotted field: null parent / null leaf as the JSONL lines {"meta": null} and
    # {"meta": {"body": null}}
    rows = ROWS[:500] + [{"id": -1, "meta": None}, {"id": -2, "meta": {"body": None}}] + ROWS[500:900]
    rows = [r for r in rows if r["meta"] is None or r["meta"]["body"] is None
            or not any(0xD800 <= ord(c) <= 0xDFFF for c in r["meta"]["body"])]
    jm = write_jsonl(tmp_path / "m.jsonl", rows)
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "--field", "meta.body", "-o", str(tmp_path / "clim"), jm)
    st = pa.Table.from_pylist(rows)
    mkshards.build(_StreamOnly(st.to_reader(max_chunksize=128)), tmp_path / "struct", field="meta.body", **OPTS)
    same_build(tmp_path / "struct", tmp_path / "clim")
    # a column that is not a string, and a path through one: the JSON reader's words, per row
    jn = write_jsonl(tmp_path / "n.jsonl", [{"text": i} for i in range(50)] + [{"text": "words here"}])
    want = json.loads(run_cli(mkshards_bin, "lint", "--json", jn, check=False).stdout)
    got = mkshards.lint(pa.table({"text": pa.array(list(range(50)) + [None])}), field="text")
    assert got["findings"][0]["count"] == 51  # 50 numbers + one null
    for f in want["findings"] + got["findings"]:
        for ex in f["examples"]:
            ex.pop("file"), ex.pop("offset")
    assert [e["note"] for e in got["findings"][0]["examples"]][:3] == \
        [e["note"] for e in want["findings"][0]["examples"]][:3]
    got = mkshards.lint(pa.table({"text": ["a", "b"]}), field="text.body")
    assert [f["rule"] for f in got["findings"]] == ["field-missing"] and got["findings"][0]["count"] == 2
    # the capsule is consumed once: a second read of it is refused, not a crash
    cap = pa.table({"text": ["x"]}).__arrow_c_stream__()
    mkshards.lint(cap, field="text")
    with pytest.raises(ValueError, match="already consumed"):
        mkshards.lint(cap, field="text")


def test_parquet_and_arrow_files_through_pyarrow(shared, mkshards_bin, tmp_path):
    """mkshards.build("x.parquet") / ("x.arrow") / a folder of them: read by pyarrow (the module has no Arrow
    C++), streamed into C, the same shards as the CLI on the same documents (as JSONL; and as the same .parquet
    where the CLI is built with Arrow)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ok = [d for d in DOCS if not any(0xD800 <= ord(c) <= 0xDFFF for c in d)]
    texts = ok[:1100] + [None] + ok[1100:]
    j = write_jsonl(tmp_path / "d.jsonl", [{"text": t} for t in texts])
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "cli"), j)
    t = pa.table({"id": pa.array(range(len(texts))), "text": pa.array(texts, pa.string())})
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    pq.write_table(t, d / "all.parquet", row_group_size=700, compression="zstd")
    with pa.ipc.new_file(str(d / "all.arrow"), t.schema) as w:  # IPC file format
        for b in t.to_batches(max_chunksize=500):
            w.write_batch(b)
    with pa.ipc.new_stream(str(d / "sub" / "stream.arrow"), t.schema) as w:  # stream format, as datasets caches
        for b in t.to_batches(max_chunksize=500):
            w.write_batch(b)
    for name in ("all.parquet", "all.arrow", "sub/stream.arrow"):
        out = tmp_path / name.replace("/", "_")
        mkshards.build(str(d / name), out, **OPTS)
        same_build(out, tmp_path / "cli")
    # a folder: its files in the CLI's order (sorted by name, recursively), here two halves of the documents
    f = tmp_path / "folder"
    (f / "b").mkdir(parents=True)
    pq.write_table(t.slice(0, 1300), f / "a.parquet", compression="snappy")
    pq.write_table(t.slice(1300), f / "b" / "part.parquet", row_group_size=300)
    mkshards.build(str(f), tmp_path / "ofolder", **OPTS)
    same_build(tmp_path / "ofolder", tmp_path / "cli")
    p = run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "-o", str(tmp_path / "clipq"), str(d / "all.parquet"),
                check=False)
    if p.returncode == 0:  # a CLI built with Arrow: the same shard bytes as from its own Parquet reader
        assert shard_files(tmp_path / "clipq") == shard_files(tmp_path / "all.parquet")
    with pytest.raises(ValueError, match="apart from"):
        mkshards.build([j, str(d / "all.parquet")], tmp_path / "mixed", **OPTS)


def test_parquet_without_pyarrow_names_it(shared, tmp_path):
    import subprocess
    import sys
    code = ("import sys; sys.modules['pyarrow'] = None; import mkshards\n"
            "try:\n mkshards.build(sys.argv[1], sys.argv[2], tokenizer='gpt2', seq_len=64)\n"
            "except ImportError as e:\n print('IMPORT', e)\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.parquet"), str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert "IMPORT" in p.stdout and "pyarrow" in p.stdout and "x.parquet" in p.stdout, p.stdout + p.stderr


def test_crafted_arrow_file_is_refused(shared, tmp_path):
    """An IPC file whose middle string offset points past its data (first and last in range, so the structural
    check passes): pyarrow reads it (its reader checks the structure
    only), mkshards validates each batch in full before C reads a row - an error naming it, never a read out of
    bounds."""
    pa = pytest.importorskip("pyarrow")
    good = pa.array(["abc", "defgh", "ij"], pa.string())
    offsets = pa.py_buffer(b"".join(int(x).to_bytes(4, "little") for x in (0, 4000, 4000, 10)))
    bad = pa.Array.from_buffers(pa.string(), 3, [None, offsets, good.buffers()[2]])
    for name, batches in (("first.arrow", [bad]), ("second.arrow", [good, bad])):
        path = tmp_path / name
        with pa.ipc.new_file(str(path), pa.schema([("text", pa.string())])) as w:
            for b in batches:
                w.write_batch(pa.record_batch([b], names=["text"]))
        # the first batch is read in Python (pyarrow's ArrowInvalid), a later one through the C stream
        with pytest.raises((mkshards.MkshardsError, pa.ArrowInvalid), match="out of bounds: 4000 > 10"):
            mkshards.build(str(path), tmp_path / (name + ".out"), tokenizer="gpt2", seq_len=64)
        assert not (tmp_path / (name + ".out") / "manifest.json").exists()


def test_invalid_utf8_is_one_reject(shared, mkshards_bin, tmp_path):
    """A document whose bytes are not UTF-8 is one reject (utf8-invalid, its record number), as the CLI rejects one
    such line, and the run goes on: Python strs holding bytes through surrogateescape (lone U+DC80..U+DCFF: the
    bytes they stand for), as items or dict fields; an Arrow string column with invalid UTF-8 (pyarrow makes one
    from buffers), as a Table and as a .parquet file read through pyarrow, whose full validation stopped the
    whole run with ArrowInvalid before (strings are now validated as bytes). Other lone surrogates (text cut
    inside a UTF-16 pair) stay replaced by U+FFFD, as the CLI decodes a JSON \\ud800 escape."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    raw = [b"first good document", b"bad \xff\xfe bytes", b"second good document", b"cut \xe2\x82 short",
           b"third good"]
    bad_lines = [2, 4]
    # the CLI on the same bytes as a .txt with one document per line
    (tmp_path / "d.txt").write_bytes(b"\n".join(raw) + b"\n")
    run_cli(mkshards_bin, "build", "-q", *CLI_OPTS, "--doc-sep", "line", "-o", str(tmp_path / "cli"),
            str(tmp_path / "d.txt"), check=False)
    cli_rej = [json.loads(x) for x in open(tmp_path / "cli" / "rejects.jsonl")]
    assert [(r["line"], r["reason"]) for r in cli_rej] == [(n, "utf8-invalid") for n in bad_lines]

    def check(out, what):
        rej = [json.loads(x) for x in open(os.path.join(out, "rejects.jsonl"))]
        assert [(r["line"], r["reason"]) for r in rej] == [(n, "utf8-invalid") for n in bad_lines], (what, rej)
        acc = json.load(open(os.path.join(out, "manifest.json")))["accounting"]
        assert acc["records"] == len(raw) and acc["documents"]["rejected"] == 2, (what, acc)
        assert shard_files(out) == shard_files(tmp_path / "cli"), what  # the good documents, the same bytes

    docs = [b.decode("utf-8", "surrogateescape") for b in raw]
    mkshards.build((d for d in docs), tmp_path / "gen", **OPTS)
    check(tmp_path / "gen", "str items")
    mkshards.build(({"meta": {"body": d}} for d in docs), tmp_path / "dicts", field="meta.body", **OPTS)
    check(tmp_path / "dicts", "dict fields")
    lr = mkshards.lint((d for d in docs))
    assert [f["count"] for f in lr["findings"] if f["rule"] == "utf8-invalid"] == [2]
    col = pa.array(raw, pa.binary())
    t = pa.table({"text": pa.Array.from_buffers(pa.string(), len(raw), col.buffers())})
    mkshards.build(t, tmp_path / "table", **OPTS)
    check(tmp_path / "table", "Arrow Table")
    pq.write_table(t, tmp_path / "bad.parquet", row_group_size=2)
    mkshards.build(str(tmp_path / "bad.parquet"), tmp_path / "pq", **OPTS)
    check(tmp_path / "pq", ".parquet through pyarrow")
    # a high surrogate alone: U+FFFD, kept (json-lone-surrogate), as the CLI's \ud800
    r = mkshards.lint(iter(["lone \ud800 end", "ok"]))
    assert {f["rule"] for f in r["findings"]} >= {"json-lone-surrogate"} and r["documents"] == 2


def test_chat_records_from_python_sources(shared, mkshards_bin, tmp_path):
    """format='chat' / 'prompt-completion' from a pyarrow Table (messages = list<struct<role, content>>, as HF
    datasets store them), a .parquet file and an iterable of dicts: the same shard bytes, manifest accounting
    and reject lines as the CLI on the same rows written as JSONL (json.dumps, compact, ensure_ascii=False).
    Rows with a null content, an unknown role, invalid UTF-8 in a content: one reject each, as in JSONL."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    qwen = os.path.join(shared, "vocab", "hf", "qwen2", "tokenizer.json")
    if not os.path.isfile(qwen):
        pytest.skip(f"no {qwen}")
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    convs = []
    for i in range(120):
        m = [{"role": "system", "content": "be brief"}]
        for j in range(1 + i % 3):
            m += [{"role": "user", "content": f"q {i} {j} caf\u00e9 \U0001F600 " + "why " * (i % 5)},
                  {"role": "assistant", "content": f"a {i} {j}\n\"x\" " + "so " * (i % 7)}]
        convs.append(m)
    convs[3][1]["content"] = None
    convs[8][1]["role"] = "bot"
    col = pa.array(convs, pa.list_(msg))
    # row 11's first content as invalid UTF-8, from buffers (pyarrow validates the strings it makes)
    flat = col.flatten()
    vals = [None if v is None else v.encode() for v in flat.field("content").to_pylist()]
    vals[col.offsets[11].as_py()] = b"bad \xff utf-8"
    b = pa.array(vals, pa.binary())
    content = pa.Array.from_buffers(pa.string(), len(b), b.buffers(), null_count=b.null_count)
    col = pa.ListArray.from_arrays(col.offsets, pa.StructArray.from_arrays([flat.field("role"), content],
                                                                           fields=list(msg)))
    table = pa.table({"messages": col, "id": pa.array(range(120))})  # "id" is not read
    jl = tmp_path / "chat.jsonl"
    with open(jl, "wb") as f:
        for row in table.select(["messages"]).cast(pa.schema([("messages", pa.list_(
                pa.struct([("role", pa.string()), ("content", pa.binary())])))])).to_pylist():
            for m in row["messages"]:
                m["content"] = None if m["content"] is None else m["content"].decode("utf-8", "surrogateescape")
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
                    + b"\n")
    opts = dict(tokenizer=qwen, seq_len=128, format="chat", chat_template="qwen2.5", val_fraction=0.1,
                shard_tokens=2048, threads=2)
    cli = ["-t", qwen, "-L", "128", "--format", "chat", "--chat-template", "qwen2.5", "--val-fraction", "0.1",
           "--shard-tokens", "2K", "-j", "2", "-q"]
    run_cli(mkshards_bin, "build", *cli, "-o", str(tmp_path / "cli"), str(jl))

    def same(out, what):
        assert shard_files(out) == shard_files(tmp_path / "cli") and shard_files(out), what
        a, c = (json.load(open(os.path.join(d, "manifest.json")))["accounting"] for d in (out, tmp_path / "cli"))
        assert a == c, what  # bytes_in included: the rows' JSON is the JSONL's bytes

        def rej(d):
            out = []
            for x in open(os.path.join(d, "rejects.jsonl")):
                r = json.loads(x)
                out.append((r["line"], r["reason"], r["detail"], r["bytes"]))
            return out
        assert rej(out) == rej(tmp_path / "cli"), what
        # rows 3 (content null), 8 (role 'bot'), 11 (invalid UTF-8: the parser refuses the line) are lines 4, 9, 12
        assert {4, 9, 12} <= {r[0] for r in rej(out)}, rej(out)

    mkshards.build(table, tmp_path / "table", **opts)
    same(tmp_path / "table", "pyarrow Table")
    pq.write_table(table, tmp_path / "chat.parquet", row_group_size=32)
    mkshards.build(str(tmp_path / "chat.parquet"), tmp_path / "pq", **opts)
    same(tmp_path / "pq", ".parquet through pyarrow")
    rows = (json.loads(x) for x in open(jl, encoding="utf-8", errors="surrogateescape"))
    mkshards.build(rows, tmp_path / "dicts", **opts)
    same(tmp_path / "dicts", "dicts")
    # lint of the Table: the CLI's findings
    lp = mkshards.lint(table, tokenizer=qwen, seq_len=128, format="chat", chat_template="qwen2.5")
    lc = json.loads(run_cli(mkshards_bin, "lint", "-t", qwen, "--seq-len", "128", "--format", "chat",
                            "--chat-template", "qwen2.5", "--json", str(jl), check=False).stdout)
    assert [(f["rule"], f["count"]) for f in lp["findings"]] == [(f["rule"], f["count"]) for f in lc["findings"]]
    # prompt / completion strings and a dotted messages field
    pc = pa.table({"prompt": [f"p {i}" for i in range(40)], "completion": [f"c {i} " * (i % 5 + 1) for i in range(40)]})
    pj = tmp_path / "pc.jsonl"
    pj.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in pc.to_pylist()))
    run_cli(mkshards_bin, "build", *[x if x != "chat" else "prompt-completion" for x in cli], "-o",
            str(tmp_path / "pc_cli"), str(pj))
    mkshards.build(pc, tmp_path / "pc_py", **{**opts, "format": "prompt-completion"})
    assert shard_files(tmp_path / "pc_py") == shard_files(tmp_path / "pc_cli")
    nested = pa.table({"conv": pa.array([{"messages": c} for c in convs[:40]],
                                        pa.struct([("messages", pa.list_(msg))]))})
    nj = tmp_path / "nested.jsonl"
    nj.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                          for r in nested.to_pylist()), encoding="utf-8")
    run_cli(mkshards_bin, "build", *cli, "--messages-field", "conv.messages", "-o", str(tmp_path / "n_cli"), str(nj))
    mkshards.build(nested, tmp_path / "nested", messages_field="conv.messages", **opts)
    assert shard_files(tmp_path / "nested") == shard_files(tmp_path / "n_cli") and shard_files(tmp_path / "nested")
