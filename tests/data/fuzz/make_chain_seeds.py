#!/usr/bin/env python3
"""Seeds for fuzz_tk_chains (tests/data/fuzz/tk_chains), stdlib only:

    python3 tests/data/fuzz/make_chain_seeds.py   # rewrites the folder

Layout (tests/fuzz_tk_chains.c): flags byte (bit 0: byte-level vocabulary,
else SentencePiece-style), then the normalizer, pre_tokenizer and decoder
sections as u16 little-endian length + JSON (length 0: null), then the text.
The chains of real tokenizer.json files (Llama 2 / Mistral Prepend + Replace,
NFC, NFKC, Lowercase, Strip, Precompiled, Metaspace, Split with the Qwen2
regex, Digits, Punctuation, WhitespaceSplit; decoders Replace, ByteFallback,
Fuse, Strip, Metaspace) next to the hostile ones of issue 32: a character
replaced by kilobytes, a chain that doubles the text eight times, the
(?:x+x+)+y|. and x+y|. Split regexes, a decoder that expands one piece.
"""
import base64
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tk_chains")
SP = "\u2581"


def charsmap(key, value):
    """A precompiled_charsmap with one rule: the one-byte key -> value (see tests/hostile_tk.h)."""
    node = 1 ^ key
    leaf = node ^ 1
    n_units = max(node, leaf) + 1
    units = [0] * n_units
    units[0] = 1 << 10
    units[node] = 1 << 10 | 1 << 8 | key
    units[leaf] = 0x80000000
    blob = struct.pack("<I", n_units * 4) + b"".join(struct.pack("<I", u) for u in units)
    return blob + value + b"\0"


def precompiled(key, value):
    return {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap(key, value)).decode()}


QWEN2 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
         "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def split(regex, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


NORMALIZERS = {
    "none": None,
    "nfc": {"type": "NFC"},
    "nfkc": {"type": "NFKC"},
    "nfd_lower_strip": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"},
                                                            {"type": "Strip", "strip_left": True, "strip_right": True}]},
    "llama2": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": SP},
                                                   {"type": "Replace", "pattern": {"String": " "}, "content": SP}]},
    "replace_regex": {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    "precompiled": precompiled(ord("a"), "\u00e0".encode()),
    # hostile: one character to 4 KB; eight steps that each double the text
    "replace_4k": {"type": "Replace", "pattern": {"String": "a"}, "content": "b" * 4000},
    "precompiled_4k": precompiled(ord("a"), b"c" * 4000),
    "double_x8": {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"},
                                                       "content": "aa"}] * 8},
}
PRETOKENIZERS = {
    "none": None,
    "metaspace": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "always", "split": True},
    "qwen2": split(QWEN2),
    "digits_punct": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                           {"type": "Punctuation", "behavior": "Isolated"}]},
    "wssplit": {"type": "WhitespaceSplit"},
    "removed": split("\\s+", "Removed"),
    # hostile: exponential per start position, quadratic over the text
    "exp": split("(?:x+x+)+y|."),
    "quad": split("x+y|."),
}
DECODERS = {
    "none": None,
    "llama2": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": SP}, "content": " "},
                                                {"type": "ByteFallback"}, {"type": "Fuse"},
                                                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "metaspace": {"type": "Metaspace", "replacement": SP, "prepend_scheme": "always", "split": True},
    "replace_4k": {"type": "Replace", "pattern": {"String": "a"}, "content": "d" * 4000},
}
TEXTS = {
    "multi": "Hello  w\u00f6rld \uff46\uff55\uff4c\uff4c 123 \U0001F600 \ufb01 caf\u00e9s \u0645\u0631\u062d\u0628\u0627"
             " \u4f60\u597d \ufdfa\n\n\tx".encode(),
    "a": b"aaaa ab ba aab" * 4,
    "x": (b"x" * 22 + b"z") * 12,
    "bad_utf8": b"a\xff\xfeb \xc3\x28 \xe2\x82 end",
}

SEEDS = [
    # (name, bytelevel, normalizer, pre_tokenizer, decoder, text)
    ("sp_llama2", 0, "llama2", "none", "llama2", "multi"),
    ("sp_llama2_a", 0, "llama2", "none", "llama2", "a"),
    ("sp_metaspace", 0, "none", "metaspace", "metaspace", "multi"),
    ("sp_nfkc_metaspace", 0, "nfkc", "metaspace", "llama2", "multi"),
    ("sp_precompiled", 0, "precompiled", "metaspace", "llama2", "a"),
    ("sp_nfd_lower_strip", 0, "nfd_lower_strip", "wssplit", "llama2", "multi"),
    ("sp_digits", 0, "none", "digits_punct", "llama2", "multi"),
    ("sp_decoder_4k", 0, "none", "none", "replace_4k", "a"),
    ("sp_replace_4k", 0, "replace_4k", "none", "llama2", "a"),
    ("sp_precompiled_4k", 0, "precompiled_4k", "metaspace", "llama2", "a"),
    ("sp_double_x8", 0, "double_x8", "none", "none", "a"),
    ("sp_exp", 0, "none", "exp", "none", "x"),
    ("bl_qwen2_nfc", 1, "nfc", "qwen2", "none", "multi"),
    ("bl_qwen2_bad_utf8", 1, "nfc", "qwen2", "none", "bad_utf8"),
    ("bl_replace_regex", 1, "replace_regex", "removed", "none", "multi"),
    ("bl_exp", 1, "none", "exp", "none", "x"),
    ("bl_quad", 1, "none", "quad", "none", "x"),
    ("bl_replace_4k", 1, "replace_4k", "qwen2", "none", "a"),
    ("bl_precompiled_4k", 1, "precompiled_4k", "none", "none", "a"),
    ("bl_double_x8", 1, "double_x8", "qwen2", "none", "a"),
]


def section(obj):
    if obj is None:
        return struct.pack("<H", 0)
    b = json.dumps(obj, ensure_ascii=False).encode()
    assert len(b) < 65536
    return struct.pack("<H", len(b)) + b


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for name, bl, nm, pt, dec, text in SEEDS:
        data = bytes([bl]) + section(NORMALIZERS[nm]) + section(PRETOKENIZERS[pt]) + section(DECODERS[dec]) + TEXTS[text]
        assert len(data) <= 16384, (name, len(data))
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote", len(SEEDS), "seeds to", OUT)


if __name__ == "__main__":
    main()
