#!/usr/bin/env python3
"""Full-range scan of the regex constructs a rank file's --pattern REGEX can use, against tiktoken (its Rust regex,
Unicode 16.0): tests/test_tk_pattern.c recomputes it with mkshards' regex path (hf_regex.c on PCRE2, tiktoken's
meaning) and compares.

For each construct, every code point c (surrogates excepted) is put in the construct's probes (e.g. "'" + c for the
contractions: does (?i:'s|...) take c as one of its letters?); the probes of 4,096 code points are concatenated and
encoded by tiktoken.Encoding(pat_str=CONSTRUCT, mergeable_ranks={the 256 single bytes}): text no match covers is
dropped, so the ids are the bytes the regex matched. One digest per block (first 16 hex digits of sha256 over the ids
as little-endian uint32).

    pip install tiktoken          # 0.14.0
    python3 tests/ref/make_tk_pattern_scan.py > tests/data/tk_pattern/scan.json
"""
import json
import sys

import tiktoken

from tk_pattern_common import KIMI, ids_sha

BLOCK = 4096
# name -> (regex, probes): what a real pattern uses - Qwen's / Llama 3's / o200k's (?i:...) contractions, ASCII
# letters under (?i), the general categories and classes of every tiktoken-style pattern, and scripts (Kimi K2's
# tiktoken pattern starts with [\p{Han}]+)
CONSTRUCTS = {
    "contractions": (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)""", ["'{c}", "'l{c}", "'r{c}", "'v{c}", "'{c}l", "'{c}e"]),
    "ascii_fold": (r"""(?i:[a-z])""", ["{c}"]),
    "letter": (r"""\p{L}""", ["{c}"]),
    "upper": (r"""\p{Lu}""", ["{c}"]),
    "number": (r"""\p{N}""", ["{c}"]),
    "mark": (r"""\p{M}""", ["{c}"]),
    "not_lnw": (r"""[^\s\p{L}\p{N}]""", ["{c}"]),
    "word": (r"""\w""", ["{c}"]),
    "space": (r"""\s""", ["{c}"]),
    "digit": (r"""\d""", ["{c}"]),
    "han": (r"""\p{Han}""", ["{c}"]),
    "latin": (r"""\p{Latin}""", ["{c}"]),
    # scripts: computed from Unicode 16.0's Scripts.txt (tokenizer/ucd_scripts.c), not PCRE2's tables
    "hiragana": (r"""\p{Hiragana}""", ["{c}"]),
    "katakana": (r"""\p{Katakana}""", ["{c}"]),
    "hangul": (r"""\p{Hangul}""", ["{c}"]),
    "cyrillic": (r"""\p{Cyrillic}""", ["{c}"]),
    "arabic": (r"""\p{Arabic}""", ["{c}"]),
    "greek": (r"""\p{Greek}""", ["{c}"]),
    "common": (r"""\p{Common}""", ["{c}"]),
    "inherited": (r"""\p{Zinh}""", ["{c}"]),
    "not_han": (r"""\P{Han}""", ["{c}"]),
    # class set operations and nested classes (Kimi K2's pattern: its two letter classes, and the pattern whole)
    "kimi_upper": (r"""[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]""", ["{c}"]),
    "kimi_lower": (r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]""", ["{c}"]),
    "minus_sym": (r"""[\p{L}--\p{Latin}]|[\p{Greek}~~\p{Lu}]""", ["{c}"]),
    "nested_not": (r"""[^\p{N}[\p{Cyrillic}&&\p{Ll}]\S--\p{Cn}]""", ["{c}"]),
    "kimi": (KIMI, ["x{c}{c}'s {c}1 A{c}a {c}A"]),
}
# The same digests for a tokenizer.json Split regex (HF tokenizers' Oniguruma, Unicode 16.0; mkshards: hf_regex.c's
# Oniguruma dialect): the bytes each regex matches, from Split(behavior="removed", invert=True), which keeps the
# matches and drops the rest. Scripts are the Script property there too (U+3001 is not \p{Han}).
ONIG = {
    "han": (r"""\p{Han}""", ["{c}"]),
    "latin": (r"""\p{Latin}+""", ["{c}"]),
    "hiragana_katakana": (r"""[\p{Hiragana}\p{Katakana}]""", ["{c}"]),
    "not_han": (r"""\P{Han}""", ["{c}"]),
    "not_han_class": (r"""[^\p{Han}\p{Common}]""", ["{c}"]),
    "greek_cyrillic_arabic": (r"""\p{Greek}|\p{Cyrillic}|\p{Arabic}|\p{Hangul}""", ["{c}"]),
}


def block_text(probes, b):
    """Block b's text: each probe in turn, once per code point of the block (surrogates skipped) with {c} that code
    point."""
    return "".join(p.format(c=chr(c)) for p in probes for c in range(b * BLOCK, (b + 1) * BLOCK)
                   if not 0xD800 <= c <= 0xDFFF)


def main():
    ranks = {bytes([b]): b for b in range(256)}
    out = {"block": BLOCK, "tiktoken": tiktoken.__version__, "constructs": {}}
    for name, (pat, probes) in CONSTRUCTS.items():
        enc = tiktoken.Encoding(name, pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        digests = []
        for b in range(0x110000 // BLOCK):
            text = block_text(probes, b)
            ids = enc.encode_ordinary(text)
            digests.append(ids_sha(ids))
        out["constructs"][name] = {"pat": pat, "probes": probes, "digests": digests}
        print(name, file=sys.stderr)
    import tokenizers
    from tokenizers import Regex, pre_tokenizers
    out["tokenizers"] = tokenizers.__version__
    out["oniguruma"] = {}
    for name, (pat, probes) in ONIG.items():
        split = pre_tokenizers.Split(Regex(pat), behavior="removed", invert=True)
        digests = []
        for b in range(0x110000 // BLOCK):
            text = block_text(probes, b)
            ids = [x for piece, _ in split.pre_tokenize_str(text) for x in piece.encode("utf-8")]
            digests.append(ids_sha(ids))
        out["oniguruma"][name] = {"pat": pat, "probes": probes, "digests": digests}
        print("oniguruma", name, file=sys.stderr)
    json.dump(out, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
