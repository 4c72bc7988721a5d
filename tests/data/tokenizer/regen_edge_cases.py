#!/usr/bin/env python3
"""Regenerate edge_cases.jsonl: pre-tokenizer edge cases with the ids that
Python tiktoken (the reference) gives, for gpt2, cl100k_base, o200k_base.

Usage: pip install tiktoken; python3 regen_edge_cases.py ../../../../shared/vocab
Rank files are read from the given folder (the same files the tests use)."""
import json
import os
import sys

import tiktoken
from tiktoken.load import load_tiktoken_bpe

CASES = [
    # contractions (case, long s, inside words, at the end)
    "I'm can't won't they're we've he'll she'd it's", "I'M CAN'T THEY'RE WE'VE HE'LL SHE'D",
    "don't", "'s", "'S", "x'ſ", "'", "''s", "'hello", "O'Neil's", "rock'n'roll", "'ll'", "a'", "'re'",
    # digits
    "1", "12", "123", "1234", "12345678901", " 42", "x1y22z333", "3.14159", "1,000,000", "٣٤٥٦", "½¼", "Ⅻ",
    # whitespace runs, CR/LF
    "a\nb", "a\r\nb", "a\n\nb", "a\r\n\r\nb", "\n", "\r\n", "a \n b", "a  \n  b", "a\t\tb", "a \t b",
    "trailing  ", "trailing\n", "trailing \n", "x\n\n  ", "x\n\n", "  leading", "\n\n\nx", "a   b", "a\u00a0b",
    "a\u3000b", "  \t\n \r\n  x", " ", "  ", "\t", "\u2028", "a\u2029b", "x \u00a0y",
    # punctuation, slashes
    "hello, world!", "a/b/c", "a/\nb", "...\n\n", "!!!\r\n", " ?!", "(x)", "<|endoftext|>", "foo.bar()",
    "http://example.com/a?b=c", "#include <stdio.h>\n", "    return x;\n}\n",
    # letters classes, case (o200k splits on case changes)
    "HelloWorld", "HELLOworld", "helloWORLD", "CamelCaseString", "ABCdef", "XMLHttpRequest", "iPhone",
    "Ǆemal ǅemal", "ǈ", "naïve café", "Straße", "ΑΒΓ αβγ", "Привет мир", "こんにちは世界", "中文字符测试",
    "한국어 텍스트", "مرحبا بالعالم", "שלום עולם", "हिन्दी", "ไทย", "ʰʲʷ",
    # combining marks
    "e\u0301", "\u0301", "\u0301abc", " \u0301", "a\u0301\u0302b", "x \u0308y", "\u0301\u0301",
    "Ａ\u0301", "ABC\u0301", "\u0301ABC", "!\u0301",
    # emoji, ZWJ sequences, flags, variation selectors
    "👍", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇫🇷", "a👍b", " 👍", "❤️", "1️⃣", "👍🏽",
    # misc
    # planes above 3 (classified per call, not from the table)
    "a\U000E0041b", " \U000F0000x", "\U0010FFFD", "x\U000E0100y", "\U0002A700\U00030000",
    "", "a", " a", "  a", "x" * 300, "ab" * 200, " " * 200 + "x", "9" * 100, "\u200b", "\ufeffBOM",
    # runs of ASCII letters/digits scanned 16 bytes at a time: a different
    # character just before, at and after each 16-byte boundary, at the end
    *[("abcdefghijklmnopqrstuvwxyzABCDEFGH"[:k] + c + "xyz") for k in (14, 15, 16, 17, 31, 32, 33)
      for c in ("é", "1", " ", "@", "`", "[", "{", "_")],
    *[("0123456789012345678901234567890123"[:k] + c + "42") for k in (14, 15, 16, 17, 31, 32, 33)
      for c in ("٣", "a", "/", ":", " ")],
    "abcdefghijklmnopq", "0123456789012345", "01234567890123456", " abcdefghijklmnopqrstuvwxyz0123456789",
]

ENCODINGS = {
    "gpt2": ("gpt2.tiktoken", "gpt2"),
    "cl100k_base": ("cl100k_base.tiktoken", "cl100k_base"),
    "o200k_base": ("o200k_base.tiktoken", "o200k_base"),
}


def local_constructors(vocab):
    """tiktoken's own encoding definitions (pat_str, specials), with the rank
    files read from `vocab` instead of downloaded."""
    import tiktoken_ext.openai_public as op
    files = {"r50k_base": "gpt2.tiktoken", "cl100k_base": "cl100k_base.tiktoken",
             "o200k_base": "o200k_base.tiktoken"}

    def local_bpe(url, expected_hash=None):
        base = url.rsplit("/", 1)[-1].replace(".tiktoken", "")
        return load_tiktoken_bpe(os.path.join(vocab, files[base]))

    op.load_tiktoken_bpe = local_bpe
    op.data_gym_to_mergeable_bpe_ranks = lambda **kw: load_tiktoken_bpe(os.path.join(vocab, "gpt2.tiktoken"))
    return op


def main():
    vocab = sys.argv[1]
    op = local_constructors(vocab)
    out = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "edge_cases.jsonl"), "w")
    for name, (fname, tk_name) in ENCODINGS.items():
        enc = tiktoken.Encoding(**getattr(op, tk_name)())
        for text in CASES:
            out.write(json.dumps({"enc": name, "text": text, "ids": enc.encode_ordinary(text)},
                                 ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()
