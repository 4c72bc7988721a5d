#!/usr/bin/env python3
"""Seeds for fuzz_tk_pattern (tests/fuzz_tk_pattern.c): byte 0 = normalization (0 none, 1 nfc, 2 nfkc), bytes 1-2 =
the regex's length (little-endian), the regex, then the text.

    python3 tests/data/fuzz/make_tk_pattern_seeds.py      # writes tests/data/fuzz/tk_pattern/
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tk_pattern")
QWEN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Kimi K2's pat_str (tokenization_kimi.py)
KIMI = (r"""[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
        r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
        r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
SEEDS = {
    "qwen_nfc": (1, QWEN, "Hello world's 12345 cafe\u0301 IT'S \n\n  x<|endoftext|>y"),
    "possessive_nfkc": (2, r"""'(?i:[sdmt]|ll|ve|re)|\p{N}{1,2}+| ?[^\s\p{L}\p{N}]++|\p{L}++|\s++$|\s+""",
                        "\uff1c|endoftext|\uff1e \u2460 x  "),
    "dollar_gaps": (0, r"""\w+$|\w""", "ab.\nab"),
    "han_script": (0, r"""[\p{Han}]+|\p{L}+|\s+""", "\u4e2d\u6587English\u6df7\u5408 \U0002ebf0"),
    "backtrack": (0, r"""(?:a+a+)+b|.""", "a" * 3000),
    "refused_b": (0, r"""\bx\b|.""", "x y"),
    # a binary property beside && is refused (regex_sets.c evaluates categories and scripts only)
    "refused_class_ops": (0, r"""[\p{L}&&\p{Alphabetic}]+""", "abc"),
    # Rust's class set operations, nested and ASCII classes, scripts by Unicode 16.0 (regex_sets.c)
    "kimi": (0, KIMI, "\u4e2d\u6587English\u6df7\u5408123 \U00031350x Ab\u4e2dCD \u3005\u3007 DON'T's\n\n  \u0391\u03b2"),
    "class_sets": (0, r"""[a-z&&[^aeiou]]+|[\p{L}--\p{Latin}]+|[\p{Greek}~~\p{Lu}]|[[:alpha:][:^digit:]]+|[-]a-]|.""",
                   "hello world \u03b1\u0391 \u0416 12 -]a"),
    "script_neg": (2, r"""\P{Han}+|[^\p{Latin}\p{Common}]+|[\p{Assigned}--\p{L}]|[\p{ASCII}&&\S]""",
                   "a\u00e9\u6f22 1 \u03b2\U000e0000!"),
    "nested_deep": (0, "[" * 33 + "a" + "]" * 33 + "|.", "ab"),
    "icase_script": (0, r"""(?i)[\p{Han}a]|.""", "aA\u4e2d"),
    "lookaround": (1, r"""\s+(?!\S)|\s+|(?<=a)b|[^\s]+""", "a b  c\u00a0\u2028d"),
    "invalid_utf8": (0, r"""\p{L}+|.""", "ab\xff\xfe".encode("latin-1").decode("latin-1")),
    "empty_matches": (3, r"""x*|a""", "aaxa"),
    "case_fold": (0, r"""(?i:[a-z]+)|.""", "\u017f\u212a \u0130I\u0131"),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (norm, regex, text) in SEEDS.items():
        r = regex.encode("utf-8")
        t = text.encode("latin-1") if name == "invalid_utf8" else text.encode("utf-8")
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(bytes([norm]) + struct.pack("<H", len(r)) + r + t)
    print(f"{len(SEEDS)} seeds in {OUT}")


if __name__ == "__main__":
    main()
