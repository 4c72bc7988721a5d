#!/usr/bin/env python3
"""Seeds for fuzz_reader that use the configurations added for issue 12:
lint with a tokenizer + hist (txt modes, config bit 0x04) and the smallest
caps (bit 0x08: one remembered duplicate, one example per rule). The first
byte is the configuration (see tests/fuzz_reader.c), the rest the file.
Run from the repository root: python3 tests/data/fuzz/make_reader_seeds.py"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reader")
DOCS = (b"the thin thing\n\nthe the the\nin the\n\n\n"
        b"the thin thing\n<|endoftext|> x\x00y\n\xff\xfe bad utf8\n" + b"a" * 300 + b"\n"
        b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk=\r\n")
SEEDS = {
    "seed_tok_line": 0x86 | 0x00, "seed_tok_blank": 0x87,
    "seed_tok_caps_line": 0x8E, "seed_tok_caps_blank": 0x8F,
    "seed_tok_cut_line": 0x86 | 0x20 | 0x40, "seed_caps_nontok": 0x8A,
}
for name, cfg in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([cfg]) + DOCS)
with open(os.path.join(OUT, "seed_tok_empty"), "wb") as f:
    f.write(bytes([0x86]))
with open(os.path.join(OUT, "seed_tok_dups"), "wb") as f:
    f.write(bytes([0x8E]) + b"same\n" * 20 + b"other\nsame\n")
