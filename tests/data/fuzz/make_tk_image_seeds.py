#!/usr/bin/env python3
"""Seed corpus for the table-image fuzz target (stdlib only).

    python3 tests/data/fuzz/make_tk_image_seeds.py   # rewrites tests/data/fuzz/tk_image

Layout of one input (tests/fuzz_tk_image.c): flags byte (bit 0: edits of the
real gpt2 image instead of a whole file; bit 1: copy the real header part 1
in; bit 2: skip the digests), then the payload. An edit is u8 section (0-10,
255 = header), u32 little-endian offset in it, u8 length, the bytes. The real
images are megabytes, so whole-file inputs cover the header checks and the
edit lists reach every section.
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tk_image")

# tk_image.c's header (img_hdr): part 1 (88 bytes), part 2, offsets, lengths
PART1 = 88
N_SEC = 11
ARENA, TOK_OFF, MAP, SMAP, FILTER, PAIR2, MAXLEN2, MAP3, ID2RANK, SPECIALS, CHARMIN = range(N_SEC)
HEADER = 255


def edit(where, off, data):
    return struct.pack("<BIB", where, off, len(data)) + data


def header(n_ranks=256, vocab=256, max_len=1, shift=60, eot=0xFFFFFFFF, n_specials=0, name=b"gpt2",
           offs=None, lens=None, total=None, version=3):
    p1 = b"MKSTKIM\0" + struct.pack("<II", version, 88 + 32 + 16 + 1024 + 32 + 64 + 16 * N_SEC)
    p1 += struct.pack("<Q", total or 0) + bytes(PART1 - len(p1) - 8)
    p2 = struct.pack("<8I", 1, n_ranks, vocab, max_len, shift, eot, n_specials, 0)
    p2 += struct.pack("<QQ", 15, 15) + struct.pack("<256I", *range(256)) + bytes(32)
    p2 += name.ljust(64, b"\0")
    p2 += struct.pack("<11Q", *(offs or [0] * N_SEC)) + struct.pack("<11Q", *(lens or [0] * N_SEC))
    return p1 + p2


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    seeds = {}
    # whole files: nothing, a header alone, its fields at their edges
    seeds["empty"] = bytes([0])
    seeds["magic_only"] = bytes([0]) + b"MKSTKIM\0"
    seeds["header_only"] = bytes([2]) + header()
    seeds["header_version_0"] = bytes([2]) + header(version=0)
    seeds["header_huge_counts"] = bytes([2]) + header(n_ranks=0xFFFFFFFF, vocab=0xFFFFFFFF, max_len=0xFFFFFFFF)
    seeds["header_offsets_wrap"] = bytes([2]) + header(offs=[2**64 - 64] * N_SEC, lens=[2**63] * N_SEC)
    seeds["header_name_unterminated"] = bytes([2]) + header(name=b"g" * 64)
    seeds["header_shift_0"] = bytes([2]) + header(shift=0) + bytes(4096)
    # edits of the real image: none (accepted: the rank file's ids), each
    # section's start zeroed, header fields, offset/id/special tables with
    # the digests skipped (the structural checks alone)
    seeds["edit_none"] = bytes([1])
    seeds["edit_none_skip"] = bytes([5])
    for s in range(N_SEC):
        seeds["edit_zero_section_%d" % s] = bytes([1]) + edit(s, 0, bytes(16))
    for at, name in ((8, "version"), (16, "total"), (24, "dev"), (80, "req_pat"), (88, "pattern"),
                     (92, "n_ranks"), (100, "max_token_len"), (108, "eot"), (112, "n_specials"),
                     (1192, "name"), (1256, "off"), (1344, "len")):
        seeds["edit_header_" + name] = bytes([1]) + edit(HEADER, at, b"\x01")
        seeds["edit_header_%s_skip" % name] = bytes([5]) + edit(HEADER, at, b"\xff\xff")
    seeds["edit_tok_off_down_skip"] = bytes([5]) + edit(TOK_OFF, 8 * 1000, b"\x00" * 8)
    seeds["edit_tok_off_far_skip"] = bytes([5]) + edit(TOK_OFF, 8 * 1000, struct.pack("<Q", 1 << 40))
    seeds["edit_tok_off_last_skip"] = bytes([5]) + edit(TOK_OFF, 8 * 50257, struct.pack("<Q", 1))
    seeds["edit_id2rank_skip"] = bytes([5]) + edit(ID2RANK, 4 * 500, b"\xff\xff\xff\x00")
    seeds["edit_specials_len_skip"] = bytes([5]) + edit(SPECIALS, 4, struct.pack("<I", 0xFFFFFFF0))
    seeds["edit_specials_id_skip"] = bytes([5]) + edit(SPECIALS, 0, struct.pack("<I", 7))
    seeds["edit_byte_rank_skip"] = bytes([5]) + edit(HEADER, 88 + 48 + 4 * 97, struct.pack("<I", 50000))
    seeds["edit_arena_skip"] = bytes([5]) + edit(ARENA, 300, b"\x00\x01\x02\x03")
    seeds["edit_many"] = bytes([1]) + b"".join(edit(s, 1000 * s + 7, bytes([s])) for s in range(N_SEC))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
