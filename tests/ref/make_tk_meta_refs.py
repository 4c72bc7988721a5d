#!/usr/bin/env python3
"""Reference ids for Meta's Llama 3 / Llama 4 tokenizer.model (tests/test_tk_meta.c).

Made with Meta's own tokenizer code (llama-models 0.3.0: llama3/tokenizer.py and llama4/tokenizer.py, each builds a
tiktoken.Encoding from its tokenizer.model, pat_str and special tokens) and tiktoken:

    pip download llama-models==0.3.0 --no-deps -d /tmp/lm && unzip -q /tmp/lm/*.whl -d /tmp/lm/x
    pip install tiktoken zstandard
    python3 tests/ref/make_tk_meta_refs.py /tmp/lm/x [SHARED_DIR]     # default ../shared

Writes tests/data/tk_meta/refs.jsonl.zst, one line per record:
  {"tok": NAME, "sha256": FILE_SHA, "specials": {TEXT: ID, ...}, "bos": ID, "eos": ID}   (first line per tokenizer)
  {"tok": NAME, "cat": CATEGORY, "doc": N, "n": COUNT, "sha": SHA}   the first 300 documents of each category
  {"tok": NAME, "mode": "plain"|"special", "text": T, "ids": [...]}   every edge case, full ids
SHA = first 16 hex digits of sha256 over the ids as little-endian uint32 (as make_tk_hf_refs.py).
Ids are those of the tiktoken.Encoding Meta's Tokenizer builds (Tokenizer.model.encode): plain = disallowed_special=()
- special-token text as text (the mkshards default); special = allowed_special="all" (--allow-special all).
Meta's Tokenizer.encode also cuts a text into 400,000-character pieces and cuts runs of over 25,000 consecutive
whitespace / non-whitespace characters, encoding each piece alone: ids differ from the whole text's at those cuts
(long books). mkshards encodes the whole document, as tiktoken and HF's tokenizer.json of these models do; the script
prints how many corpus documents that cut changes.
"""
import hashlib
import importlib
import json
import os
import pathlib
import struct
import sys

import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tk_meta", "refs.jsonl.zst")
PKG = sys.argv[1]
SHARED = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "..", "..", "shared")
CATS = ["en-books", "multi", "code", "web"]
PER_CAT = 300

sys.path.insert(0, os.path.join(HERE))
from make_tk_hf_refs import edge_cases  # noqa: E402  (the common edge cases; needs tokenizers installed)


def ids_sha(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:16]


def corpus():
    for cat in CATS:
        with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        for i, line in enumerate(data.decode("utf-8").splitlines()[:PER_CAT]):
            yield cat, i, json.loads(line)["text"]


META_EXTRA = [
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|reserved_special_token_0|> <|reserved_special_token_255|> <|reserved_special_token_250|>",
    "<|header_start|>user<|header_end|>\n\nhi<|eot|><|eom|>", "<|vision_reserved_special_token_1047|><|patch|>",
    "<|reasoning_thinking_start|>x<|reasoning_thinking_end|> <|reserved_special_token_903|>",
    "<|python_tag|>print(1)<|eom_id|>", "<|image|><|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "CamelCaseWordsAndALLCAPS lowerUPPER'S it'S", "a/b/c\n/path/to/file/\r\n", "١٢٣٤٥ 12345 ½",
]


def main():
    sys.path.insert(0, PKG)
    docs = list(corpus())
    lines = []
    for name in ["llama3", "llama4"]:
        model = os.path.join(PKG, "llama_models", name, "tokenizer.model")
        Tok = importlib.import_module(f"llama_models.{name}.tokenizer").Tokenizer
        t = Tok(pathlib.Path(model))
        sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        lines.append({"tok": name, "sha256": sha, "specials": t.special_tokens,
                      "bos": t.encode("", bos=True, eos=False)[0], "eos": t.encode("", bos=False, eos=True)[0]})
        cut = 0
        for cat, i, text in docs:
            ids = t.model.encode(text, allowed_special=set(), disallowed_special=())
            cut += ids != t.encode(text, bos=False, eos=False, allowed_special=set(), disallowed_special=())
            lines.append({"tok": name, "cat": cat, "doc": i, "n": len(ids), "sha": ids_sha(ids)})
        print(f"{name}: Meta's 400,000 / 25,000-character cuts change {cut} of {len(docs)} documents")
        for text in edge_cases() + META_EXTRA:
            lines.append({"tok": name, "mode": "plain", "text": text,
                          "ids": t.model.encode(text, allowed_special=set(), disallowed_special=())})
            lines.append({"tok": name, "mode": "special", "text": text,
                          "ids": t.model.encode(text, allowed_special="all")})
    data = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines).encode("utf-8")
    with open(OUT, "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(data))
    print(f"{OUT}: {len(lines)} lines")


if __name__ == "__main__":
    main()
