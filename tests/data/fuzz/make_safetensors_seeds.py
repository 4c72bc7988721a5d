#!/usr/bin/env python3
"""Seeds for fuzz_safetensors (tests/fuzz_safetensors.c): small .safetensors
files written the way the reference writer lays them out (8-byte size,
compact JSON padded with spaces to 8, tensors by decreasing dtype size then
name) plus near-misses of each check the reader makes.
Run from the repository root: python3 tests/data/fuzz/make_safetensors_seeds.py"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors")
SIZE = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "U8": 1, "BOOL": 1, "F64": 8}


def st(tensors, meta=None, pad=True, raw_header=None, extra=b""):
    """tensors: list of (name, dtype, shape, bytes)."""
    tensors = sorted(tensors, key=lambda t: (-SIZE[t[1]], t[0]))
    hdr, off, data = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, b in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = raw_header if raw_header is not None else json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data + extra


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


SEEDS = {
    "ok_two": st([("w", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "BF16", [2], b"\x80\x3f\x00\x40")],
                 meta={"format": "pt"}),
    "ok_f16": st([("h", "F16", [3], b"\x00\x3c\x00\x80\x01\x00")]),
    "ok_scalar_empty": st([("s", "F32", [], f32(7)), ("z", "F32", [0, 3], b"")]),
    "ok_empty": st([]),
    "ok_unpadded": st([("a", "U8", [1], b"\x01")], pad=False),
    "ok_escapes": st([("a\\u00e9\"\\\\/\\ud83d\\ude00", "F32", [1], f32(1))],
                     raw_header=b'{"a\\u00e9\\"\\\\\\/\\ud83d\\ude00":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'),
    "bad_size_mismatch": st([], raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', extra=f32(1)),
    "bad_overlap": st([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                     b'"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}', extra=f32(1, 2)),
    "bad_hole": st([], raw_header=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', extra=f32(1, 2)),
    "bad_past_end": st([], raw_header=b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', extra=f32(1)),
    "bad_dup": st([], raw_header=b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                 b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', extra=b"xy"),
    "bad_dtype": st([], raw_header=b'{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}', extra=f32(1)),
    "bad_overflow": st([], raw_header=b'{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'),
    "bad_number": st([], raw_header=b'{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', extra=f32(1)),
    "bad_trailing": st([], raw_header=b'{} x'),
    "bad_meta": st([], raw_header=b'{"__metadata__":{"k":1}}'),
    "bad_start": st([], raw_header=b' {}'),
    "bad_header_size": struct.pack("<Q", 1 << 30) + b"{}",
    "bad_short": b"\x02\x00\x00",
}
os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
