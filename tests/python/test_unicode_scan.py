"""Full-range Unicode scan (issue 27): every code point in the probe of make_unicode_scan.py gives the reference
libraries' ids (tiktoken 0.14 for gpt2 / cl100k_base / o200k_base; HF tokenizers 0.23 for two byte-level
tokenizer.json files, one on the hand scanners and one on PCRE2, and for a single_word added token next to each
code point: HF's word class, Rust regex's Unicode 16.0 \w; and BERT's normalizer + pre-tokenizer, cased and
uncased, whose output the ids spell byte by byte). The references are digests per 4,096 code
points in tests/data/unicode_scan.json, made by tests/unicode/make_unicode_scan.py."""
import importlib.util
import json
import os

import pytest

import mkshards

from conftest import DATA, ROOT, VOCAB

FIXTURE = os.path.join(DATA, "unicode_scan.json")


def _maker():
    spec = importlib.util.spec_from_file_location("make_unicode_scan",
                                                  os.path.join(ROOT, "tests", "unicode", "make_unicode_scan.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def scan():
    return json.load(open(FIXTURE, encoding="utf-8")), _maker()


def _encoding(name, fx, tmp_path):
    if name in fx["hf_regexes"]:
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(_make.hf_json(VOCAB, fx["hf_regexes"][name])), encoding="utf-8")
        return mkshards.Encoding.from_file(p)
    return mkshards.get_encoding(name)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "hf_llama3_split", "hf_pcre2_split",
                                  "hf_single_word", "hf_bert_uncased", "hf_bert_cased"])
def test_full_range_scan(shared, scan, name, tmp_path):
    fx, maker = scan
    global _make
    _make = maker
    probe = maker.PROBE
    if name == "hf_single_word":  # a single_word added token next to each code point: HF's word class (Rust \w)
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(maker.hf_single_word_json(VOCAB)), encoding="utf-8")
        enc, probe = mkshards.Encoding.from_file(p), fx["single_word_probe"]
    elif name in fx["hf_bert"]:  # BertNormalizer + BertPreTokenizer, the normalized text spelled out in bytes
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(maker.hf_bert_json(*fx["hf_bert"][name])), encoding="utf-8")
        enc, probe = mkshards.Encoding.from_file(p), fx["bert_probe"]
    else:
        enc = _encoding(name, fx, tmp_path)
    cps, _ = maker.probes()
    got = maker.digests(cps, lambda t: enc.encode_ordinary_batch(t, num_threads=0), probe)
    want = fx["digests"][name]
    bad = [f"U+{b * fx['block']:04X}" for b, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{name}: {len(bad)} blocks of {fx['block']} code points differ from the reference: {bad[:20]}"
