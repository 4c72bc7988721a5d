#!/usr/bin/env python3
"""Tekken fixtures and reference ids for tests/test_tk_tekken.c (Mistral's tekken.json, load_tekken.c).

Made with mistral_common 1.13.1 (Tekkenizer, which runs tiktoken) and the two tekken.json files its wheel ships:

    pip install mistral-common==1.13.1 zstandard tokenizers numpy
    python3 tests/ref/make_tk_tekken_refs.py [SHARED_DIR]     # default ../shared

Writes, under tests/data/tk_tekken/:
  tekken_small.json        a crafted v7 file: the first 2,300 vocab entries of tekken_240911.json, of which
                           default_vocab_size - default_num_special_tokens = 2,100 are kept (the cut), 24 listed
                           special tokens and fillers up to 100, Mistral's pattern, an extra top-level key with
                           nested values; raw UTF-8 (ensure_ascii=False), token_str "\\u0000" escaped
  tekken_small_regex.json  a crafted v3 file: no special_tokens (mistral_common's 20 deprecated ones, fillers to
                           40), another pattern (Qwen's: the general regex engine runs it), every non-ASCII
                           character escaped (\\uXXXX, surrogate pairs)
  refs.jsonl.zst           one line per record:
    {"tok": NAME, "sha256": FILE_SHA, "n_words": N, "specials": {TEXT: ID, ...}, "bos": ID, "eos": ID}  (first)
    {"tok": NAME, "cat": CATEGORY, "doc": N, "n": COUNT, "sha": SHA}   the first 150 documents of each category
    {"tok": NAME, "text": T, "ids": [...]}                             every edge case, full ids
    {"tok": NAME, "scan": [DIGEST, ...]}    the fixtures and tekken_240911: a full-range Unicode scan, every code point
                                            (surrogates excepted) in the probe of tests/unicode/make_unicode_scan.py,
                                            one digest per 4,096 code points (its digests())
Ids: Tekkenizer.from_file(path).encode(text, bos=False, eos=False). SHA = first 16 hex digits of sha256 over the
ids as little-endian uint32 (as make_tk_meta_refs.py). NAME is the file name without .json: the two fixtures and
tekken_240718 / tekken_240911 (the real files, not committed: tests/tk_tekken_real.sh takes them from the wheel).
"""
import base64
import hashlib
import json
import os
import struct
import sys

import zstandard
from mistral_common.tokens.tokenizers.tekken import Tekkenizer
import mistral_common

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tk_tekken")
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
PKG_DATA = os.path.join(os.path.dirname(mistral_common.__file__), "data")
CATS = ["en-books", "multi", "code", "web"]
PER_CAT = 150

sys.path.insert(0, HERE)
from make_tk_hf_refs import edge_cases  # noqa: E402  (the common edge cases)
sys.path.insert(0, os.path.join(HERE, "..", "unicode"))
import make_unicode_scan  # noqa: E402  (the probe and digests of the full-range scan)

TEKKEN_EXTRA = [
    "<s>[INST] hi [/INST]</s>", "<unk><pad>[IMG][IMG_BREAK][IMG_END]", "<SPECIAL_20> <SPECIAL_99> <SPECIAL_999>",
    "[TOOL_CALLS][{\"name\": \"f\"}]", "don't DON'T it's I'm", "CamelCaseWordsAndALLCAPS lowerUPPER",
    "a/b/c\n/path/to/file/\r\n", "x//\n\n//y", "1234567890" * 40, "3.14159 2,718 1e10 0x1F", "١٢٣٤٥ 12345 ½ ²³",
    "\U0001F600\U0001F44D\U0001F3FD 🇫🇷 👨‍👩‍👧", "\t \t\n  \r\n \u3000\u00a0", "ÀÉÎÕÜ àéîõü ǅungla",
    "Ǆ\u0301x \u0301abc", "日本語 English 中文 한국어", "<<s>> </s/> <s", "[INST][INST]",
]

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                r"\s+(?!\S)|\s+")

V7_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
               "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
               "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
               "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"]


def ids_sha(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:16]


def corpus():
    for cat in CATS:
        with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        for i, line in enumerate(data.decode("utf-8").splitlines()[:PER_CAT]):
            yield cat, i, json.loads(line)["text"]


def make_fixtures():
    with open(os.path.join(PKG_DATA, "tekken_240911.json"), encoding="utf-8") as f:
        real = json.load(f)
    vocab = real["vocab"][:2300]
    assert all(base64.b64decode(v["token_bytes"]) == bytes([i]) for i, v in enumerate(vocab[:256]))
    small = {
        "config": {"pattern": real["config"]["pattern"], "num_vocab_tokens": len(vocab),
                   "default_vocab_size": 2200, "default_num_special_tokens": 100, "version": "v7"},
        "vocab": vocab,
        "special_tokens": [{"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(V7_SPECIALS)],
        "x_extra": {"nested": [[{"a": None}], 1.5e3, -0.25, True, False, "s\u0000\U0001F600", {}, []]},
    }
    with open(os.path.join(OUT, "tekken_small.json"), "w", encoding="utf-8") as f:
        json.dump(small, f, ensure_ascii=False, indent=1)
    regex = {
        "config": {"pattern": QWEN_PATTERN, "num_vocab_tokens": 1800, "default_vocab_size": 1840,
                   "default_num_special_tokens": 40, "version": "v3"},
        "vocab": real["vocab"][:1800],
    }
    with open(os.path.join(OUT, "tekken_small_regex.json"), "w", encoding="ascii") as f:
        json.dump(regex, f, ensure_ascii=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    make_fixtures()
    docs = list(corpus())
    edges = edge_cases() + TEKKEN_EXTRA
    lines = []
    files = [os.path.join(OUT, "tekken_small.json"), os.path.join(OUT, "tekken_small_regex.json"),
             os.path.join(PKG_DATA, "tekken_240718.json"), os.path.join(PKG_DATA, "tekken_240911.json")]
    for path in files:
        name = os.path.basename(path)[:-5]
        t = Tekkenizer.from_file(path)
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        specials = {s["token_str"]: s["rank"] for s in t._all_special_tokens}
        lines.append({"tok": name, "sha256": sha, "n_words": t.n_words, "specials": specials, "bos": t.bos_id,
                      "eos": t.eos_id})
        for cat, i, text in docs:
            ids = t.encode(text, bos=False, eos=False)
            lines.append({"tok": name, "cat": cat, "doc": i, "n": len(ids), "sha": ids_sha(ids)})
        for text in edges:
            ids = t.encode(text, bos=False, eos=False)
            assert t.decode(ids) == text
            lines.append({"tok": name, "text": text, "ids": ids})
        if name.startswith("tekken_small") or name == "tekken_240911":
            cps, _ = make_unicode_scan.probes()
            lines.append({"tok": name, "scan": make_unicode_scan.digests(
                cps, lambda texts: [t.encode(x, bos=False, eos=False) for x in texts])})
        print(name, len(docs), "documents,", len(edges), "edge cases")
    body = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    with open(os.path.join(OUT, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(body))


if __name__ == "__main__":
    main()
