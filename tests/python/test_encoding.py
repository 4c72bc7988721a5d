"""mkshards.Encoding: tiktoken's API and ids (shared oracle, live tiktoken when installed, the CLI)."""
import json
import os
import pickle
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import mkshards
from conftest import SAMPLES, VOCAB, oracle, run_cli

NAMES = ["gpt2", "cl100k_base", "o200k_base"]


def test_import_from_anywhere(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import mkshards; print(mkshards.__version__, mkshards.__file__)"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == mkshards.__version__ and out[0].count(".") == 2
    # the installed package, not the source tree
    assert "site-packages" in out[1] or os.environ.get("MKS_ALLOW_SOURCE_IMPORT")


@pytest.mark.parametrize("name", NAMES)
def test_oracle_ids(shared, oracle_docs, name):
    """encode_ordinary_batch (all threads), 1 thread, numpy variants and single calls give the oracle's ids."""
    enc = mkshards.get_encoding(name)
    ref = oracle(name)
    docs = [oracle_docs[cat][i] for cat, i, _ in ref]
    want = [ids for _, _, ids in ref]
    got = enc.encode_ordinary_batch(docs, num_threads=0)
    bad = [i for i in range(len(docs)) if got[i] != want[i]]
    assert not bad, f"{name}: {len(bad)} of {len(docs)} documents differ from the oracle, first {ref[bad[0]][:2]}"
    small = [i for i in range(len(docs)) if len(docs[i]) < 20000][:200]
    assert enc.encode_ordinary_batch([docs[i] for i in small], num_threads=1) == [want[i] for i in small]
    ids, off = enc.encode_ordinary_batch_to_numpy(docs, num_threads=2)
    assert ids.dtype == np.uint32 and off[-1] == len(ids) == sum(map(len, want))
    for i in small[:50]:
        assert ids[off[i]:off[i + 1]].tolist() == want[i]
        assert enc.encode_ordinary(docs[i]) == want[i]
        assert enc.encode_to_numpy(docs[i], disallowed_special=()).tolist() == want[i]
        assert enc.decode(want[i]) == docs[i]
    assert enc.decode_bytes(np.asarray(want[0], np.uint32)) == docs[0].encode()


def test_cli_parity(shared, mkshards_bin, oracle_docs, tmp_path):
    """encode / encode_batch equal `mkshards encode` (ordinary and --allow-special all)."""
    docs = oracle_docs["web"][:120] + oracle_docs["code"][:60] + ["x <|endoftext|> y <|fim_prefix|>", "", " \n "]
    docs += [json.loads(l)["text"] for l in open(os.path.join(SAMPLES, "tiny.jsonl"))]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    for name in ("cl100k_base", "o200k_base"):
        enc = mkshards.get_encoding(name)
        run_cli(mkshards_bin, "encode", "-t", name, str(src), "--ids-out", str(tmp_path / "o.ids"))
        cli = [json.loads(l) for l in open(tmp_path / "o.ids")]
        assert cli == enc.encode_ordinary_batch(docs, num_threads=2)
        assert cli == enc.encode_batch(docs, disallowed_special=())
        run_cli(mkshards_bin, "encode", "-t", name, "--allow-special", "all", str(src), "--ids-out",
                str(tmp_path / "s.ids"))
        cli = [json.loads(l) for l in open(tmp_path / "s.ids")]
        assert cli == enc.encode_batch(docs, allowed_special="all")
        assert cli[180] == enc.encode(docs[180], allowed_special="all")


def test_tiktoken_semantics(shared, tiktoken_mod):
    tiktoken = tiktoken_mod
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        tt = tiktoken.get_encoding(name)
        me = mkshards.get_encoding(name)
        assert me.n_vocab == tt.n_vocab and me.max_token_value == tt.max_token_value
        assert me.eot_token == tt.eot_token
        assert me.special_tokens_set == tt.special_tokens_set
        assert me.name == tt.name
        texts = ["hello <|endoftext|> world", "<|endoftext|><|endoftext|>", "a<|endofprompt|>b<|fim_prefix|>c",
                 "naïve café 日本語 🙂 \r\n\t  x", "", "  ", "\ud83d\ude00 lone \ud800 end", "'ll 'S 123456789"]
        for t in texts:
            assert me.encode_ordinary(t) == tt.encode_ordinary(t), (name, t)
            for kw in ({"allowed_special": "all"}, {"disallowed_special": ()},
                       {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
                       {"allowed_special": {"<|endoftext|>"}}):
                try:
                    want = tt.encode(t, **kw)
                except ValueError:
                    with pytest.raises(ValueError):
                        me.encode(t, **kw)
                    continue
                assert me.encode(t, **kw) == want, (name, t, kw)
                assert me.encode_to_numpy(t, **kw).tolist() == want
            try:
                want = tt.encode(t)
            except ValueError:
                with pytest.raises(ValueError, match="disallowed special token"):
                    me.encode(t)
                with pytest.raises(ValueError):
                    me.encode_batch(["ok", t])
            else:
                assert me.encode(t) == want
        assert me.encode_batch(texts, allowed_special="all", num_threads=3) == \
            tt.encode_batch(texts, allowed_special="all", num_threads=3)
        ids = tt.encode("héllo wörld 🙂", disallowed_special=())
        assert me.decode(ids) == tt.decode(ids)
        for cut in range(1, len(ids)):  # partial UTF-8: errors="replace" like tiktoken
            assert me.decode(ids[:cut]) == tt.decode(ids[:cut])
            assert me.decode_bytes(ids[:cut]) == tt.decode_bytes(ids[:cut])
        assert me.decode_with_offsets(ids) == tt.decode_with_offsets(ids)
        assert me.decode_batch([ids, ids[:2]]) == tt.decode_batch([ids, ids[:2]])
        assert me.decode_tokens_bytes(ids) == tt.decode_tokens_bytes(ids)
        assert me.decode_single_token_bytes(ids[0]) == tt.decode_single_token_bytes(ids[0])
        assert me.encode_single_token("<|endoftext|>") == tt.encode_single_token("<|endoftext|>")
        assert me.encode_single_token(b" hello") == tt.encode_single_token(b" hello")
        assert me.token_byte_values() == tt.token_byte_values()


def test_special_token_errors_like_tiktoken(shared, tiktoken_mod):
    """The ValueError for disallowed special text carries tiktoken's message; allowed/disallowed combinations,
    encode_batch and encode_to_numpy raise alike; decode_batch / eot_token / special_tokens_set agree."""
    tt = tiktoken_mod.get_encoding("cl100k_base")
    me = mkshards.get_encoding("cl100k_base")
    cases = [("x <|endoftext|> y", {}), ("<|fim_prefix|>", {"allowed_special": {"<|endoftext|>"}}),
             ("a<|endofprompt|>", {"disallowed_special": {"<|endofprompt|>"}}),
             ("<|endoftext|>", {"allowed_special": "all", "disallowed_special": "all"}),
             ("z <|fim_suffix|>", {"allowed_special": set(), "disallowed_special": "all"})]
    for text, kw in cases:
        try:
            want = tt.encode(text, **kw)
        except ValueError as e:
            for call in (me.encode, me.encode_to_numpy, lambda t, **k: me.encode_batch(["ok", t], **k)):
                with pytest.raises(ValueError) as ei:
                    call(text, **kw)
                assert str(ei.value) == str(e), (text, kw)
        else:
            assert me.encode(text, **kw) == want, (text, kw)
    ids = [tt.encode(t, allowed_special="all") for t in ("héllo", "<|endoftext|>x", "")]
    assert me.decode_batch(ids) == tt.decode_batch(ids)
    assert me.decode_bytes_batch(ids) == tt.decode_bytes_batch(ids)
    assert me.eot_token == tt.eot_token and me.special_tokens_set == tt.special_tokens_set


def test_names_from_tiktoken_cache(shared, tiktoken_cache, tmp_path):
    """A name resolves through tiktoken's cache alone (no MKS_VOCAB_DIR), as the CLI's --tokenizer NAME."""
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=tiktoken_cache)
    env.pop("MKS_VOCAB_DIR", None)
    code = ("import mkshards; e = mkshards.get_encoding('cl100k_base'); "
            "print(e.name, e.n_vocab, e.encode('hello world'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 2)[:2] == ["cl100k_base", "100277"] and "[15339, 1917]" in out.stdout
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path)  # empty: not found, with the C message
    code = "import mkshards\ntry:\n mkshards.get_encoding('o200k_base')\nexcept ValueError as e: print('ERR', e)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("ERR cannot load tokenizer 'o200k_base'"), out


def test_from_file_every_kind(shared, mkshards_bin, tmp_path):
    ref = mkshards.get_encoding("gpt2")
    text = "Hello world, it's 2024!\n\tnaïve 🙂"
    want = ref.encode_ordinary(text)
    kinds = {"tiktoken": os.path.join(VOCAB, "gpt2.tiktoken"), "encoder.json+vocab.bpe": VOCAB}
    run_cli(mkshards_bin, "tokenizer", "export", "-t", "gpt2", "--out", str(tmp_path / "tokenizer.json"))
    kinds["tokenizer.json"] = str(tmp_path / "tokenizer.json")
    for kind, path in kinds.items():
        e = mkshards.Encoding.from_file(path)
        assert e.encode_ordinary(text) == want, kind
        assert e.n_vocab == 50257 and e.eot_token == 50256, kind
        if kind != "tokenizer.json":  # a tokenizer.json's fingerprint covers its own pre-tokenizer spec
            assert e.fingerprint == ref.fingerprint, kind


def test_from_file_every_kind_equals_cli(shared, mkshards_bin, tmp_path):
    """Encoding.from_file on every kind the CLI's --tokenizer loads gives the CLI's ids: a trained .tiktoken +
    .meta.json, a trained tokenizer.json, a folder holding tokenizer.json, HF byte-level and SentencePiece-style
    tokenizer.json fixtures, a SentencePiece .model."""
    texts = ["Hello world, it's 2024!", "  naïve café 日本語 🙂\n\tx", "def f(x):\n    return x + 1\n", "", "a <|endoftext|> b"]
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tr = tmp_path / "tr"
    tr.mkdir()
    run_cli(mkshards_bin, "tokenizer", "train", "-q", "-n", "400", "-s", "<|endoftext|>", "-o", str(tr / "bpe.tiktoken"),
            os.path.join(SAMPLES, "tiny.jsonl"))
    run_cli(mkshards_bin, "tokenizer", "train", "-q", "-n", "400", "-o", str(tr / "tokenizer.json"),
            os.path.join(SAMPLES, "tiny.jsonl"))
    data = os.path.join(os.path.dirname(SAMPLES), "tests", "data")
    kinds = [str(tr / "bpe.tiktoken"), str(tr / "tokenizer.json"), str(tr),
             os.path.join(data, "tk_hf", "bl_added.json"), os.path.join(data, "tk_hf", "sp_llama2.json"),
             os.path.join(data, "tk_spm", "bpe_llama.model")]
    assert os.path.exists(str(tr / "bpe.tiktoken.meta.json"))
    for path in kinds:
        p = run_cli(mkshards_bin, "encode", "-t", path, str(src), "--ids-out", str(tmp_path / "o.ids"), check=False)
        if p.returncode != 0 and path.endswith(".model"):
            continue  # a CLI without SentencePiece .model support: nothing to compare with
        assert p.returncode == 0, p.stderr
        enc = mkshards.Encoding.from_file(path)
        cli = [json.loads(l) for l in open(tmp_path / "o.ids")]
        assert enc.encode_ordinary_batch(texts) == cli, path
        assert [enc.encode_ordinary(t) for t in texts] == cli, path
        assert enc.n_vocab > 0 and enc.name


def test_errors_carry_the_c_message(shared, tmp_path):
    with pytest.raises(mkshards.MkshardsError, match="missing.tiktoken") as ei:
        mkshards.Encoding.from_file(tmp_path / "missing.tiktoken")
    assert ei.value.code < 0 and isinstance(ei.value, ValueError)
    (tmp_path / "bad.tiktoken").write_text("not base64 !!!\n")
    with pytest.raises(mkshards.MkshardsError, match="bad.tiktoken"):
        mkshards.Encoding.from_file(tmp_path / "bad.tiktoken")
    enc = mkshards.get_encoding("cl100k_base")
    with pytest.raises(mkshards.MkshardsError, match="100261"):
        enc.decode([1, 100261])  # an unused id inside the vocabulary range
    with pytest.raises(ValueError):
        enc.decode([-1])
    with pytest.raises(TypeError):
        enc.encode_ordinary(b"bytes")
    with pytest.raises(TypeError):
        enc.encode_ordinary_batch(["ok", 3])
    with pytest.raises(KeyError):
        enc.encode_single_token("not one token at all")


def test_gil_released(shared):
    enc = mkshards.get_encoding("o200k_base")
    text = ("lorem ipsum dolor sit amet, " * 400000)  # ~11 MB
    # the tick period on this machine now: sleep(0.001) takes several ms on a loaded one
    # (CI measured 46 ticks in 0.32 s with the GIL free), so the bound is relative to it
    n0, b0 = 0, time.perf_counter()
    while time.perf_counter() - b0 < 0.1:
        n0 += 1
        time.sleep(0.001)
    period = (time.perf_counter() - b0) / n0
    ticks = 0
    t = threading.Thread(target=enc.encode_ordinary, args=(text,))
    t0 = time.perf_counter()
    t.start()
    while t.is_alive():
        ticks += 1
        time.sleep(0.001)
    t.join()
    dt = time.perf_counter() - t0
    # with the GIL held the main thread could not tick at all during the encode (1-2 ticks)
    assert ticks >= 5 and ticks > 0.1 * dt / period, (ticks, dt, period)


def test_pickle_and_threads(shared):
    enc = mkshards.get_encoding("gpt2")
    e2 = pickle.loads(pickle.dumps(enc))
    assert e2.encode_ordinary("pickled ok") == enc.encode_ordinary("pickled ok")
    docs = [f"document {i} " * (i % 7 + 1) for i in range(500)]
    want = [enc.encode_ordinary(d) for d in docs]
    for th in (1, 2, 8, 0):
        assert enc.encode_ordinary_batch(docs, num_threads=th) == want
    assert enc.encode_ordinary_batch([]) == []
    assert enc.count(docs[3]) == len(want[3])
