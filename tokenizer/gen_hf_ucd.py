#!/usr/bin/env python3
"""Generate tokenizer/hf_ucd_data.c: where HF tokenizers' normalizers follow another Unicode version than the
system utf8proc (2.8: Unicode 15.0) that normalize.c and hf_normalize.c call.

Found by scanning every code point through HF tokenizers 0.23.3 and mkshards (a tokenizer.json per normalizer
whose byte-fallback vocabulary spells out the normalized text): NFD 1, NFKC 134, NFKD 135, StripAccents 357,
Lowercase 55 code points differed (and NFC on sequences such as U+11935 U+11930, which utf8proc composes):

- NFC, NFD, NFKC, NFKD and StripAccents come from the unicode-normalization-alignments crate, whose tables
  are Unicode 9.0: every character assigned in 9.0 or before decomposes, reorders and is a mark as in the
  UCD, and none assigned later does (checked per version on the 16.0 UCD's decompositions and combining
  classes: all known up to 9.0, none from 10.0 on). Such a character is a starter HF leaves alone: written
  here as ranges (`tk_hf_new_ranges`), from the UCD's Age property.
- Lowercase is Rust's char::to_lowercase, whose tables are newer than utf8proc's (Unicode 17.0 in the Rust
  that built tokenizers 0.23.3: Garay, Beria Erfe, U+A7CB -> U+0264 ...). Written as the code points whose
  lowercase differs from utf8proc's, with HF's (`tk_hf_lower_pairs`), asked of HF itself: no Python package
  ships Unicode 17.0's case mappings.
- The Punctuation pre-tokenizer's is_punctuation (unicode_categories crate) is older still: 29 code points
  (`tk_hf_punct_flips`, asked of HF).
- Three characters of 9.0 changed category since (U+1CF2, U+1CF3 were Mc, U+111C9 was Po): HF's
  StripAccents follows 9.0 for them (`tk_hf_mark_flips`, asked of HF).

Data: unicodedataplus 16.0.0.post1 (Age), tokenizers 0.23.3 (Lowercase, StripAccents, Punctuation), the system libutf8proc (what the
table is the difference from). Usage:

    pip install unicodedataplus==16.0.0.post1 tokenizers==0.23.3
    python3 tokenizer/gen_hf_ucd.py > tokenizer/hf_ucd_data.c
"""
import ctypes
import ctypes.util
import sys

from gen_ucd_common import UNICODE_VERSION, ucd_package, write_array, write_prologue

HF_NORMALIZATION_VERSION = (9, 0)  # unicode-normalization-alignments' tables
TOKENIZERS_VERSION = "0.23.3"


def new_ranges(ucd):
    """[first, last] ranges of the code points assigned after HF_NORMALIZATION_VERSION (up to the UCD's)."""
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        age = ucd.age(chr(cp))
        if not age or not age[0].isdigit():  # unassigned
            continue
        if tuple(int(x) for x in age.split(".")) <= HF_NORMALIZATION_VERSION:
            continue
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def lower_pairs():
    """(cp, HF's lowercase) where HF's Lowercase gives one character other than utf8proc_tolower's."""
    import tokenizers
    from tokenizers.normalizers import Lowercase
    if tokenizers.__version__ != TOKENIZERS_VERSION:
        sys.exit(f"tokenizers {tokenizers.__version__}, want {TOKENIZERS_VERSION}")
    lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so")
    lib.utf8proc_tolower.restype = ctypes.c_int32
    lib.utf8proc_tolower.argtypes = [ctypes.c_int32]
    low = Lowercase()
    out = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        hf = low.normalize_str(chr(cp))
        if len(hf) != 1:  # U+0130 -> "i\u0307", hf_normalize.c's own case
            if cp != 0x130:
                sys.exit(f"U+{cp:04X}: HF's lowercase has {len(hf)} characters")
            continue
        if ord(hf) != lib.utf8proc_tolower(cp):
            out.append((cp, ord(hf)))
    return out


def mark_flips(ranges):
    """Code points assigned by 9.0 whose mark-ness (general category M: what HF's StripAccents drops) changed
    since: HF's StripAccents drops U+1CF2/U+1CF3 (Mc in 9.0, Lo now) and keeps U+111C9 (Po in 9.0, Mn now).
    Asked of HF itself, against utf8proc_category."""
    from tokenizers.normalizers import StripAccents
    lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so")
    lib.utf8proc_category.restype = ctypes.c_int
    lib.utf8proc_category.argtypes = [ctypes.c_int32]
    new = set()
    for a, b in ranges:
        new.update(range(a, b + 1))
    strip = StripAccents()
    out = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp < 0xE000 or cp in new:
            continue
        hf_mark = strip.normalize_str("a" + chr(cp)) == "a"
        if hf_mark != (lib.utf8proc_category(cp) in (6, 7, 8)):  # UTF8PROC_CATEGORY_MN, MC, ME
            out.append(cp)
    return out


def punct_flips():
    """Code points where HF's Punctuation pre-tokenizer (the unicode_categories crate's is_punctuation, whose
    tables predate Unicode 9.0: U+2E43 and later are not punctuation to it, U+166D, So since 12.0, still is)
    disagrees with utf8proc's P* categories (hf_internal.h is_punct). Asked of HF itself."""
    from tokenizers.pre_tokenizers import Punctuation
    lib = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so")
    lib.utf8proc_category.restype = ctypes.c_int
    lib.utf8proc_category.argtypes = [ctypes.c_int32]
    pt = Punctuation()
    out = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        hf = len(pt.pre_tokenize_str("a" + chr(cp) + "b")) == 3
        if hf != (12 <= lib.utf8proc_category(cp) <= 18):  # UTF8PROC_CATEGORY_PC .. PO
            out.append(cp)
    return out


def main():
    ucd = ucd_package("unicodedataplus", UNICODE_VERSION)
    ranges = new_ranges(ucd)
    pairs = lower_pairs()
    flips = mark_flips(ranges)
    pflips = punct_flips()
    out = sys.stdout
    write_prologue(out, [
        "hf_ucd_data.c - GENERATED by tokenizer/gen_hf_ucd.py from the Unicode " + UNICODE_VERSION + " UCD",
        "(unicodedataplus: Age) and HF tokenizers " + TOKENIZERS_VERSION + " (Lowercase); do not edit. Read by",
        "hf_ucd.c.",
    ], "hf_ucd.h")
    out.write("/* code points assigned after Unicode %d.%d: HF's normalizers do not know them */\n"
              % HF_NORMALIZATION_VERSION)
    write_array(out, "const uint32_t tk_hf_new_ranges[][2]", ranges, 4,
                lambda r: "{0x%04X, 0x%04X}" % (r[0], r[1]))
    out.write("const size_t tk_hf_n_new_ranges = sizeof tk_hf_new_ranges / sizeof tk_hf_new_ranges[0];\n\n")
    out.write("/* (code point, HF's lowercase) where it is not utf8proc_tolower's; by code point */\n")
    write_array(out, "const uint32_t tk_hf_lower_pairs[][2]", pairs, 4,
                lambda p: "{0x%04X, 0x%04X}" % (p[0], p[1]))
    out.write("const size_t tk_hf_n_lower_pairs = sizeof tk_hf_lower_pairs / sizeof tk_hf_lower_pairs[0];\n\n")
    out.write("/* code points of Unicode 9.0 that HF's StripAccents drops where utf8proc's category is not M,\n"
              " * or keeps where it is (their category changed since 9.0) */\n")
    write_array(out, "const uint32_t tk_hf_mark_flips[]", flips, 8, lambda c: "0x%04X" % c)
    out.write("const size_t tk_hf_n_mark_flips = sizeof tk_hf_mark_flips / sizeof tk_hf_mark_flips[0];\n\n")
    out.write("/* code points whose punctuation-ness to HF's Punctuation pre-tokenizer is not utf8proc's P* */\n")
    write_array(out, "const uint32_t tk_hf_punct_flips[]", pflips, 8, lambda c: "0x%04X" % c)
    out.write("const size_t tk_hf_n_punct_flips = sizeof tk_hf_punct_flips / sizeof tk_hf_punct_flips[0];\n")


if __name__ == "__main__":
    main()
