#!/usr/bin/env python3
"""Reference ids of a full-range Unicode scan (issue 27): every code point (surrogates excepted) in a small probe,
"x" + c + c + "'s " + c + "1 A" + c + "a " + c + "A"
(c's class decides where pieces end: a letter takes the "'s" and joins "x", else pieces split there), encoded by each reference library; written as one 64-bit digest per 4,096 code points per
tokenizer (tests/data/unicode_scan.json), which tests/python/test_unicode_scan.py recomputes with mkshards.

References: tiktoken 0.14.0 (gpt2 = r50k_base, cl100k_base, o200k_base; Rust regex, Unicode 16.0) and HF
tokenizers 0.23 (Oniguruma, Unicode 16.0) on two byte-level tokenizer.json files made here from gpt2's ranks:
one whose Split regex mkshards recognises (Llama 3's form: hand scanners) and one it does not (PCRE2 path);
and the first of them with a single_word added token "zqz" (not in gpt2's vocabulary), probed with
SW_PROBE = c + "zqz zqz" + c: HF drops the match where c is a word character (Rust regex's Unicode \w, of
Unicode 16.0 in tokenizers 0.23), so every code point's class shows in the ids.

BertNormalizer + BertPreTokenizer (hf_bert_uncased: lowercase, accents stripped; hf_bert_cased: neither) are
scanned with BERT_PROBE through a character-level BPE whose vocabulary is the 256 byte tokens <0xNN> (byte
fallback, no merges) and whose end_of_word_suffix "</w>" closes every pre-token: the ids spell the normalized
text byte by byte with each word's end marked, so every drop, space, split, decomposition and case mapping
shows (HF's unicode_categories tables are Unicode 8.0, its NFD 9.0, its lowercase Rust's).

Usage (the vocabulary files of ../shared/vocab in tiktoken's cache or $TIKTOKEN_CACHE_DIR):
    python3 tests/unicode/make_unicode_scan.py ../shared/vocab > tests/data/unicode_scan.json
    python3 tests/unicode/make_unicode_scan.py ../shared/vocab --only=hf_single_word > new.json
(--only=NAME,...: recompute these entries, keep the others of tests/data/unicode_scan.json as they are)
"""
import hashlib
import json
import os
import sys

import numpy as np

BLOCK = 4096
PROBE = "x{c}{c}'s {c}1 A{c}a {c}A"
SW_PROBE = "{c}zqz zqz{c}"
SW_TOKEN = "zqz"
# Split regexes of the two tokenizer.json files: Llama 3's (a form mkshards runs with its hand scanners) and
# one no built-in pattern equals (mkshards runs it through PCRE2)
BERT_PROBE = "x{c}{c}'s {c}1 A{c}a {c}\u00c9\t{c}\u4e2d{c}\u0301"
HF_BERT = {"hf_bert_uncased": [True, None], "hf_bert_cased": [False, None]}  # [lowercase, strip_accents]
HF_REGEXES = {
    "hf_llama3_split": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "hf_pcre2_split": r"'s|\p{Lu}\p{Ll}*|\p{L}+|\p{N}|\p{M}+|[^\s\p{L}\p{N}\p{M}]+|\s+",
}


def probes():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return cps, [PROBE.format(c=chr(c)) for c in cps]


def digests(cps, ids_of, probe=PROBE):
    """ids_of(list of str) -> list of id lists; one digest per BLOCK code points (by code point value)."""
    out = []
    i = 0
    for b in range(0x110000 // BLOCK):
        j = i
        while j < len(cps) and cps[j] < (b + 1) * BLOCK:
            j += 1
        ids = ids_of([probe.format(c=chr(c)) for c in cps[i:j]])
        lens = np.array([len(x) for x in ids], dtype="<u4")
        flat = np.array([t for x in ids for t in x], dtype="<u4")
        out.append(hashlib.sha256(lens.tobytes() + flat.tobytes()).hexdigest()[:16])
        i = j
    return out


def hf_json(vocab_dir, regex):
    """A byte-level tokenizer.json with gpt2's vocabulary and merges and `regex` as its Split pre-tokenizer."""
    enc = json.load(open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8"))
    merges = [l for l in open(os.path.join(vocab_dir, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if l]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                            "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": enc, "merges": merges},
    }


def hf_bert_json(lowercase, strip_accents):
    """BertNormalizer(lowercase, strip_accents) + BertPreTokenizer over <0x00>..<0xFF> with "</w>" after words."""
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": strip_accents, "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": "</w>", "fuse_unk": False, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {"<0x%02X>" % b: b for b in range(256)}, "merges": []},
    }


def hf_single_word_json(vocab_dir):
    """hf_json with Llama 3's Split and SW_TOKEN as a single_word, non-special added token (a new id)."""
    j = hf_json(vocab_dir, HF_REGEXES["hf_llama3_split"])
    j["added_tokens"] = [{"id": len(j["model"]["vocab"]), "content": SW_TOKEN, "single_word": True, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": False}]
    return j


def main():
    import tiktoken
    import tokenizers
    args = [a for a in sys.argv[1:] if not a.startswith("--only=")]
    only = [n for a in sys.argv[1:] if a.startswith("--only=") for n in a[7:].split(",")]
    vocab_dir = args[0]
    cps, _ = probes()
    refs = {}
    if only:
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "data", "unicode_scan.json"), encoding="utf-8") as f:
            refs = {k: v for k, v in json.load(f)["digests"].items() if k not in only}
    todo = lambda name: not only or name in only
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        if todo(name):
            e = tiktoken.get_encoding(name)
            refs[name] = digests(cps, lambda t: e.encode_ordinary_batch(t, num_threads=8))
    for name, regex in HF_REGEXES.items():
        if todo(name):
            tok = tokenizers.Tokenizer.from_str(json.dumps(hf_json(vocab_dir, regex)))
            refs[name] = digests(cps, lambda t: [x.ids for x in tok.encode_batch(t, add_special_tokens=False)])
    if todo("hf_single_word"):
        tok = tokenizers.Tokenizer.from_str(json.dumps(hf_single_word_json(vocab_dir)))
        refs["hf_single_word"] = digests(cps, lambda t: [x.ids for x in tok.encode_batch(t, add_special_tokens=False)],
                                         SW_PROBE)
    for name, (lower, strip) in HF_BERT.items():
        if todo(name):
            tok = tokenizers.Tokenizer.from_str(json.dumps(hf_bert_json(lower, strip)))
            refs[name] = digests(cps, lambda t: [x.ids for x in tok.encode_batch(t, add_special_tokens=False)],
                                 BERT_PROBE)
    json.dump({"probe": PROBE, "single_word_probe": SW_PROBE, "bert_probe": BERT_PROBE, "hf_bert": HF_BERT,
               "block": BLOCK, "hf_regexes": HF_REGEXES,
               "references": {"tiktoken": tiktoken.__version__, "tokenizers": tokenizers.__version__,
                              "unicode": "16.0.0"},
               "digests": refs}, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
