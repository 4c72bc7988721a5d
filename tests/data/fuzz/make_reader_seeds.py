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

# gzip inputs (issue 29): the reader sniffs 1f 8b 08, so the fuzzer reaches
# the inflate path, member boundaries and every damage report from these.
import gzip
import struct
import zlib

JL = b'{"text":"the thin thing"}\n{"text":"in the \\u00e9"}\n{"a":{"b":"x"}}\n{"text":1}\n'


def bgzf_block(data):
    """One BGZF block as bgzip writes it: FEXTRA with the 'BC' subfield."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = c.compress(data) + c.flush()
    extra = b"BC" + struct.pack("<HH", 2, len(body) + 25)
    head = b"\x1f\x8b\x08\x04" + b"\0\0\0\0" + b"\x00\xff" + struct.pack("<H", len(extra)) + extra
    return head + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


one = gzip.compress(JL, mtime=0)
GZ = {
    "seed_gz_jsonl": (0x00, one),
    "seed_gz_lint": (0x80, one),
    "seed_gz_multi": (0x80, gzip.compress(JL[:30], mtime=0) + gzip.compress(JL[30:], mtime=0)),
    "seed_gz_bgzf": (0x00, bgzf_block(JL) + bgzf_block(b"")),
    "seed_gz_truncated": (0x80, one[:-12]),
    "seed_gz_badcrc": (0x80, one[:-8] + bytes([one[-8] ^ 1]) + one[-7:]),
    "seed_gz_badsize": (0x80, one[:-1] + bytes([one[-1] ^ 1])),
    "seed_gz_trailing": (0x80, one + b"garbage\n"),
    "seed_gz_shorttail": (0x80, one + b"\x1f"),
    "seed_gz_txt_tok": (0x86, gzip.compress(DOCS, mtime=0)),
    "seed_gz_cut": (0x86 | 0x20 | 0x40, gzip.compress(b"b" * 5000 + b"\n" + DOCS, mtime=0)),
}
for name, (cfg, body) in GZ.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([cfg]) + body)
