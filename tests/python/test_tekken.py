"""mkshards.Encoding on Mistral's tekken.json (tokenizer/load_tekken.c) against mistral_common's ids.

The two crafted fixtures of tests/data/tk_tekken and their references (tests/ref/make_tk_tekken_refs.py:
Tekkenizer.encode(text, bos=False, eos=False) of mistral_common 1.13.1) on every edge case: encode_ordinary,
encode_ordinary_batch, decode, specials, pickling; the C side checks the corpus documents (test_tk_tekken).
"""
import io
import json
import os
import pickle

import pytest

import mkshards
from conftest import DATA

FIXTURES = ["tekken_small", "tekken_small_regex"]


def refs(name):
    zstandard = pytest.importorskip("zstandard")
    with open(os.path.join(DATA, "tk_tekken", "refs.jsonl.zst"), "rb") as f:
        text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8").read()
    rows = [json.loads(line) for line in text.split("\n") if line]  # not splitlines: U+2028 inside texts
    head = next(r for r in rows if r["tok"] == name and "specials" in r)
    edges = [(r["text"], r["ids"]) for r in rows if r["tok"] == name and "ids" in r]
    return head, edges


@pytest.mark.parametrize("name", FIXTURES)
def test_tekken_ids(name):
    head, edges = refs(name)
    enc = mkshards.Encoding.from_file(os.path.join(DATA, "tk_tekken", name + ".json"))
    assert enc.name == name and enc.n_vocab == head["n_words"]
    texts = [t for t, _ in edges]
    want = [ids for _, ids in edges]
    for t, ids in edges:
        assert enc.encode_ordinary(t) == ids, t
        # special-token text is ordinary text for Tekkenizer: tiktoken's encode needs disallowed_special=()
        assert enc.encode(t, disallowed_special=()) == ids, t
        assert enc.decode(ids) == t
    assert enc.encode_ordinary_batch(texts, num_threads=2) == want
    assert enc.encode_single_token("<s>") == head["specials"]["<s>"] == 1
    assert enc.encode("<s>hi</s>", allowed_special="all")[0::len(enc.encode_ordinary("hi")) + 1] == [1, 2]
    again = pickle.loads(pickle.dumps(enc))
    assert again.encode_ordinary(texts[-1]) == want[-1]
