#!/usr/bin/env python3
"""Reference ids for a rank file given its own pre-tokenizer regex and normalization (tests/test_tk_pattern.c:
mkshards --pattern REGEX --normalize nfc|nfkc, tk_load_ex).

The reference is what Qwen (v1)'s tokenization_qwen.py does with qwen.tiktoken: tiktoken.Encoding(pat_str=REGEX,
mergeable_ranks=RANKS, special_tokens=...) encoding unicodedata.normalize(FORM, text). qwen.tiktoken itself is not
in ../shared; cl100k_base's ranks with Qwen's PAT_STR and NFC exercise the same construct (the ids are a function of
ranks, regex and form), and three more configurations cover what Qwen's regex does not: $ (the text's end in
tiktoken), X{n,m}+ (possessive), NFKC, and text no match covers (dropped, as tiktoken drops it).

    pip install tiktoken tokenizers zstandard      # tiktoken 0.14.0, Python 3.11 (unicodedata: Unicode 14.0)
    python3 tests/ref/make_tk_pattern_refs.py [SHARED_DIR]     # default ../shared

Writes tests/data/tk_pattern/refs.jsonl.zst, one line per record:
  {"cfg": NAME, "vocab": FILE, "pat": REGEX, "norm": "nfc"|"nfkc"|"none"}   (first line of each configuration)
  {"cfg": NAME, "cat": CATEGORY, "doc": N, "n": COUNT, "sha": SHA}   the first PER_CAT documents of each category
  {"cfg": NAME, "mode": "plain"|"special", "text": T, "ids": [...]}   every edge case, full ids
SHA = first 16 hex digits of sha256 over the ids as little-endian uint32 (as make_tk_hf_refs.py). plain = special-token
text as text (encode_ordinary, the mkshards default); special = allowed_special="all" (--allow-special all), the
specials being the rank file's own (tiktoken's definitions of cl100k_base / o200k_base / gpt2).
"""
import json
import os
import sys
import unicodedata

import tiktoken
import zstandard
from tiktoken.load import load_tiktoken_bpe

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tk_pattern", "refs.jsonl.zst")
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
CATS = ["en-books", "multi", "code", "web"]
PER_CAT = 200

sys.path.insert(0, HERE)
from make_tk_hf_refs import edge_cases  # noqa: E402  (the common edge cases)
from tk_pattern_common import KIMI, ids_sha  # noqa: E402

# Qwen (v1) tokenization_qwen.py's PAT_STR
QWEN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# tiktoken's cl100k spelling with digits in twos: $ (text end), possessive ++ *+ ?+ {1,2}+, (?i:...)
POSSESSIVE = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,2}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
              r"""\s*[\r\n]|\s+(?!\S)|\s""")
# words at the very end of the text stay whole, other words go letter by letter; punctuation is dropped: an
# Oniguruma-style $ (end of line) would keep every line's last word whole
DOLLAR = r"""\w+$|\w|\s+"""
# letters and digits only: everything else is text no match covers (dropped)
GAPS = r"""\p{L}+| ?\p{N}+"""

SPECIALS = {
    "cl100k_base.tiktoken": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                             "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k_base.tiktoken": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    "gpt2.tiktoken": {"<|endoftext|>": 50256},
}
CONFIGS = [
    ("qwen_nfc", "cl100k_base.tiktoken", QWEN, "nfc"),
    ("possessive_nfkc", "o200k_base.tiktoken", POSSESSIVE, "nfkc"),
    ("dollar", "gpt2.tiktoken", DOLLAR, "none"),
    ("gaps_nfc", "gpt2.tiktoken", GAPS, "nfc"),
    # Kimi K2's pat_str (tk_pattern_common.py): its own tiktoken.model is not in ../shared; cl100k_base's and
    # o200k_base's ranks stand in (ids = f(ranks, regex))
    ("kimi_cl100k", "cl100k_base.tiktoken", KIMI, "none"),
    ("kimi_o200k", "o200k_base.tiktoken", KIMI, "none"),
]
EXTRA = [
    "Cafe\u0301 cafe\u0301\ncafe\u0301", "x \n", "end  ", "line one\nline two", "a.\n", "$x$ ^y^",
    "\u1100\u1161\u11a8 \uac00\u11a8 \u0041\u030a\u212b", "ﬁnal ｆｕｌｌ ²³ ① ㍿", "IT'S IT'S it'ſ",
    "123456789 1234567 12", "<|endoftext|>e\u0301<|endofprompt|>", "\u0301\u0301 ́x",
    "\uff1c|endoftext|\uff1e x \uff1c|endofprompt|\uff1e",  # NFKC makes these the specials' text
    # Han (Unicode 15.0 / 15.1 Ext. H, I too) against the letters around it; Lm / Nl / Mc of the Han script
    "\u4e2d\u6587English\u6df7\u5408123 \U00031350\U0002EBF0\U0002B740x Ab\u4e2dCD",
    "\u3005\u3007\u303b \u3041\u30ab\u30fc\uac00\U00016FF0\U00016FF1 \u2e80\u2f00 DON'T\u4e2d's",
    "\ua7cb\ua7cc\ua7cd\ua7da \U0001DF25\U0001E5D0 \u01c5ungla \u0391\u03b2\u0393 \u0416\u0436 \u0627\u0628",
]


def corpus():
    for cat in CATS:
        with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        for i, line in enumerate(data.decode("utf-8").splitlines()[:PER_CAT]):
            yield cat, i, json.loads(line)["text"]


def main():
    docs = list(corpus())
    lines = []
    for name, vocab, pat, norm in CONFIGS:
        ranks = load_tiktoken_bpe(os.path.join(SHARED, "vocab", vocab))
        enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens=SPECIALS[vocab])

        def nf(text):
            return unicodedata.normalize(norm.upper(), text) if norm != "none" else text

        lines.append({"cfg": name, "vocab": vocab, "pat": pat, "norm": norm})
        changed = 0
        for cat, i, text in docs:
            ids = enc.encode_ordinary(nf(text))
            changed += norm != "none" and nf(text) != text
            lines.append({"cfg": name, "cat": cat, "doc": i, "n": len(ids), "sha": ids_sha(ids)})
        for text in edge_cases() + EXTRA:
            lines.append({"cfg": name, "mode": "plain", "text": text, "ids": enc.encode_ordinary(nf(text))})
            lines.append({"cfg": name, "mode": "special", "text": text,
                          "ids": enc.encode(nf(text), allowed_special="all")})
        print(f"{name}: {len(docs)} documents, {changed} changed by {norm}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    data = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines).encode("utf-8")
    with open(OUT, "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(data))
    print(f"{OUT}: {len(lines)} lines, unicodedata {unicodedata.unidata_version}, tiktoken {tiktoken.__version__}")


if __name__ == "__main__":
    main()
