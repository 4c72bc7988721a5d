"""Fixtures for the mkshards Python package tests (tests/python).

Run through ctest (`make test`, test py_package: tests/python/run.sh builds a venv, `pip install .`, pytest) or by
hand after `pip install .`:  MKS_BIN=build/tools/mkshards pytest tests/python
Environment: MKS_BIN (the CLI; default build/tools/mkshards), MKS_SHARED (default ../shared),
MKS_LOADER_DUMP (tests/python_loader_dump.c, built by ctest; its tests skip without it).
"""
import hashlib
import json
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("MKS_SHARED") or os.path.join(os.path.dirname(ROOT), "shared")
VOCAB = os.path.join(SHARED, "vocab")
CORPUS = os.path.join(SHARED, "corpus")
DATA = os.path.join(ROOT, "tests", "data")
SAMPLES = os.path.join(ROOT, "samples")

os.environ.setdefault("MKS_VOCAB_DIR", VOCAB)


def pytest_configure(config):
    config.addinivalue_line("markers", "cli: needs the mkshards CLI")


@pytest.fixture(scope="session")
def shared():
    if not os.path.isfile(os.path.join(VOCAB, "cl100k_base.tiktoken")):
        pytest.skip(f"shared data not found in {SHARED} (set MKS_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def mkshards_bin():
    b = os.environ.get("MKS_BIN") or os.path.join(ROOT, "build", "tools", "mkshards")
    if not os.access(b, os.X_OK):
        pytest.skip(f"mkshards CLI not found at {b} (make build, or set MKS_BIN)")
    return b


def run_cli(mkshards_bin, *args, check=True, **kw):
    p = subprocess.run([mkshards_bin, *args], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"mkshards {' '.join(args)} -> {p.returncode}\n{p.stderr}")
    return p


def zstd_lines(path, limit=None):
    """Lines of a .zst file (the zstd CLI; stops after limit lines)."""
    p = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE)
    out = []
    try:
        for line in p.stdout:
            out.append(line)
            if limit is not None and len(out) >= limit:
                break
    finally:
        p.stdout.close()
        p.kill()
        p.wait()
    return out


@pytest.fixture(scope="session")
def oracle_docs(shared):
    """{category: [text of the first 300 documents]} - the documents the oracle covers."""
    if not shutil.which("zstd"):
        pytest.skip("zstd CLI missing")
    docs = {}
    for cat in ("en-books", "multi", "code", "web"):
        docs[cat] = [json.loads(l)["text"] for l in zstd_lines(os.path.join(CORPUS, f"{cat}.jsonl.zst"), 300)]
    return docs


def oracle(name):
    """[(cat, doc, ids)] of ../shared/corpus/oracle/NAME.oracle.jsonl.zst."""
    out = []
    for l in zstd_lines(os.path.join(CORPUS, "oracle", f"{name}.oracle.jsonl.zst")):
        d = json.loads(l)
        out.append((d["cat"], d["doc"], d["ids"]))
    return out


_TIKTOKEN_URLS = {
    "gpt2": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
    "r50k_base": "https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


@pytest.fixture(scope="session")
def tiktoken_cache(shared, tmp_path_factory):
    """A folder laid out like tiktoken's cache (files named by the sha1 of the download URL) holding the shared
    rank files: tiktoken.get_encoding and mkshards' name lookup both find them there, offline."""
    d = tmp_path_factory.mktemp("tiktoken_cache")
    for name, url in _TIKTOKEN_URLS.items():
        src = os.path.join(VOCAB, ("gpt2" if name in ("gpt2", "r50k_base") else name) + ".tiktoken")
        shutil.copyfile(src, d / hashlib.sha1(url.encode()).hexdigest())
    for f in ("vocab.bpe", "encoder.json"):  # tiktoken's gpt2 is made from these
        url = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/" + f
        shutil.copyfile(os.path.join(VOCAB, f), d / hashlib.sha1(url.encode()).hexdigest())
    return str(d)


@pytest.fixture(scope="session")
def tiktoken_mod(tiktoken_cache):
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken not installed (pip install tiktoken)")
    os.environ["TIKTOKEN_CACHE_DIR"] = tiktoken_cache
    return tiktoken


@pytest.fixture(scope="session")
def shard_sets(mkshards_bin, shared, tmp_path_factory):
    """Shard sets built by the CLI: plain (u16 gpt2, bfd, val split), zstd-compressed, u32 (cl100k, concat),
    framed (gpt2, --bos <|endoftext|> --eos none)."""
    d = tmp_path_factory.mktemp("shards")
    ins = [os.path.join(DATA, "clean"), os.path.join(SAMPLES, "tiny.jsonl"), os.path.join(DATA, "bad")]
    common = ["build", "-q", "-L", "96", "--val-fraction", "0.25", "--shard-tokens", "4K"]
    sets = {}
    run_cli(mkshards_bin, *common, "-t", "gpt2", "--pack", "bfd", "-o", str(d / "a"), *ins)
    sets["plain"] = str(d / "a")
    run_cli(mkshards_bin, *common, "-t", "gpt2", "--pack", "bfd", "--zstd", "3", "--frame-rows", "8", "-o",
            str(d / "z"), *ins)
    sets["zstd"] = str(d / "z")
    run_cli(mkshards_bin, *common, "-t", "cl100k_base", "-o", str(d / "c"), *ins)
    sets["u32"] = str(d / "c")
    run_cli(mkshards_bin, *common, "-t", "gpt2", "--bos", "<|endoftext|>", "--eos", "none", "-o", str(d / "f"), *ins)
    sets["framed"] = str(d / "f")  # BOS before every document, no EOS
    return sets
