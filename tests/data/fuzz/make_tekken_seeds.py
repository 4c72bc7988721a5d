#!/usr/bin/env python3
"""Seed corpus for fuzz_tekken (Mistral's tekken.json reader, tokenizer/load_tekken.c); stdlib only.

    python3 tests/data/fuzz/make_tekken_seeds.py   # rewrites tests/data/fuzz/tekken

Small synthetic tekken.json files (Mistral's are 15-19 MB; fuzzing wants a few KiB): the 256 byte entries plus a
few merges, with Mistral's pattern or another (the regex engine), v3 without special_tokens (the deprecated 20 +
fillers) and v7 with a list, escapes (\\u0000, surrogate pairs, a lone surrogate), nested extra keys, NaN; and
broken ones: truncated, bad base64, ranks out of order, num_special > vocab size, huge counts, deep nesting.
Layout of one input (fuzz_tk_common.h): flags byte (bits 0-1 pattern), u16 little-endian length of the file, the
file.
"""
import base64
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tekken")
PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
           r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|"
           r"\s+(?!\S)|\s+")
MERGES = [b"he", b"ll", b"llo", b" w", b"aa", b"aaaa", b"\xd0\xbf", b"\xe4\xbd\xa0\xe5\xa5\xbd"]


def pack(body, pat=0):
    return bytes([pat & 3]) + struct.pack("<H", len(body)) + body


def vocab(n_merges=len(MERGES)):
    v = []
    for i in range(256):
        s = chr(i) if i < 0x80 else None
        v.append({"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": s})
    for k, m in enumerate(MERGES[:n_merges]):
        v.append({"rank": 256 + k, "token_bytes": base64.b64encode(m).decode(), "token_str": m.decode("utf-8")})
    return v


def tekken(version="v3", nsp=30, vs=None, pattern=PATTERN, specials=None, extra=None, v=None):
    v = vocab() if v is None else v
    d = {"config": {"pattern": pattern, "num_vocab_tokens": len(v),
                    "default_vocab_size": nsp + len(v) if vs is None else vs,
                    "default_num_special_tokens": nsp, "version": version}, "vocab": v}
    if specials is not None:
        d["special_tokens"] = [{"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(specials)]
    if extra:
        d.update(extra)
    return json.dumps(d, separators=(",", ":")).encode()


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    good = tekken()
    seeds = {
        "v3_deprecated": good,
        "v7_listed": tekken("v7", 40, specials=["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[THINK]"]),
        "cut_vocab": tekken(nsp=30, vs=30 + 258),
        "regex_pattern": tekken(pattern=r"\p{N}| ?\p{L}+|[^\p{L}\p{N}]+"),
        "qwen_pattern": tekken(pattern=r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
                                       r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
        "letter_escaped": good.replace(b'"token_str":"a"', b'"token_str":"\\u0061"'),
        "escapes": tekken(extra={"x": "\u0000\ud83d\ude00 \\/\"\b\f\n\r\t", "image": {"a": [1.5, -0.0, None, True]}}),
        "lone_surrogate": good.replace(b'"token_str":null', b'"token_str":"\\ud800"', 1),
        "nan": good[:-1] + b',"audio":[NaN,Infinity,-Infinity]}',
        "spaced": json.dumps(json.loads(good)).encode(),
        "with_pattern_flag": good,
        "truncated": good[:len(good) // 2],
        "bad_base64": good.replace(b'"aGU="', b'"a?U="'),
        "rank_order": good.replace(b'"rank":257', b'"rank":258', 1),
        "nsp_gt_vs": tekken(nsp=30, vs=10),
        "huge_counts": tekken(nsp=10 ** 12, vs=10 ** 12 + 300),
        "huge_vocab": tekken(vs=16777215),
        "v11_no_specials": tekken("v11"),
        "deep": good[:-1] + b',"x":' + b"[" * 80 + b"]" * 80 + b"}",
        "not_byte": good.replace(b'"token_bytes":"BQ=="', b'"token_bytes":"Bg=="', 1),
    }
    for name, body in seeds.items():
        assert len(body) < 16384, (name, len(body))
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(pack(body, pat=3 if name == "with_pattern_flag" else 0))
    print(len(seeds), "seeds in", OUT)


if __name__ == "__main__":
    main()
