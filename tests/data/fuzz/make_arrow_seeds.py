#!/usr/bin/env python3
"""Seeds for fuzz_arrow (tests/fuzz_arrow.c): small Parquet and Arrow IPC
files written by pyarrow, each behind the configuration byte (bit 0: IPC,
bits 1-2: the field: text, meta.body, id, text.x). Every codec, nulls, a
struct column, large_string / string_view / dictionary, IPC file + stream,
and damaged copies (truncated, a flipped byte, a bad footer length).
Run from the repository root: python3 tests/data/fuzz/make_arrow_seeds.py"""
import io
import os

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arrow")
os.makedirs(OUT, exist_ok=True)
DOCS = ["the thin thing", None, "caf\u00e9 \u65e5\u672c", "", "a" * 40, "<|endoftext|> x"]
TABLE = pa.table({
    "id": pa.array(range(len(DOCS)), pa.int64()),
    "text": pa.array(DOCS, pa.string()),
    "meta": pa.StructArray.from_arrays([pa.array(DOCS)], ["body"], mask=pa.array([False, False, True, False, False, False])),
})


def parquet(table, **kw):
    b = io.BytesIO()
    pq.write_table(table, b, **kw)
    return b.getvalue()


def ipc_bytes(table, stream, compression=None):
    b = io.BytesIO()
    opts = ipc.IpcWriteOptions(compression=compression)
    w = (ipc.new_stream if stream else ipc.new_file)(b, table.schema, options=opts)
    for batch in table.to_batches(max_chunksize=2):
        w.write_batch(batch)
    w.close()
    return b.getvalue()


seeds = {}
for codec in ("none", "snappy", "zstd", "gzip", "brotli", "lz4"):
    seeds["pq_" + codec] = (0, parquet(TABLE, compression=codec, row_group_size=2))
seeds["pq_struct"] = (2, parquet(TABLE, row_group_size=3))
seeds["pq_id"] = (4, parquet(TABLE))
seeds["pq_deep"] = (6, parquet(TABLE))
seeds["pq_large"] = (0, parquet(pa.table({"text": pa.array(DOCS, pa.large_string())})))
seeds["pq_view"] = (0, parquet(pa.table({"text": pa.array(DOCS, pa.string_view())})))
seeds["pq_dict"] = (0, parquet(pa.table({"text": pa.array(DOCS).dictionary_encode()})))
seeds["pq_crc"] = (0, parquet(TABLE, write_page_checksum=True, compression="none"))
seeds["ipc_file"] = (1, ipc_bytes(TABLE, False))
seeds["ipc_stream"] = (1, ipc_bytes(TABLE, True))
seeds["ipc_zstd"] = (1, ipc_bytes(TABLE, False, "zstd"))
seeds["ipc_lz4_stream"] = (1, ipc_bytes(TABLE, True, "lz4"))
seeds["ipc_struct"] = (3, ipc_bytes(TABLE, True))
seeds["ipc_dict"] = (1, ipc_bytes(pa.table({"text": pa.array(DOCS).dictionary_encode()}), False))
seeds["ipc_view"] = (1, ipc_bytes(pa.table({"text": pa.array(DOCS, pa.string_view())}), True))
# chat formats (bit 3): messages = list<struct<role, content>>, list-of-parts
# content, TRL prompt/completion message lists, a struct column (bits 1-2 = 1:
# conv.messages), maps, nulls
MSG = pa.struct([("role", pa.string()), ("content", pa.string())])
CONVS = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo \u00e9"}], None, [],
         [{"role": "system", "content": None}, {"role": "user", "content": "x" * 30}]]
CHAT = pa.table({"messages": pa.array(CONVS, pa.list_(MSG)), "id": pa.array(range(4), pa.int64())})
PART = pa.struct([("type", pa.string()), ("text", pa.string())])
PARTS = pa.table({"messages": pa.array([[{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                      {"type": "image", "text": None}]}], None],
                                       pa.list_(pa.struct([("role", pa.string()), ("content", pa.list_(PART))])))})
PC = pa.table({"prompt": pa.array([[{"role": "user", "content": "q"}], None], pa.list_(MSG)),
               "completion": pa.array([[{"role": "assistant", "content": "a"}], [{"role": "x", "content": ""}]],
                                      pa.list_(MSG))})
NESTED = pa.table({"conv": pa.array([{"messages": c} for c in CONVS], pa.struct([("messages", pa.list_(MSG))]))})
MAPS = pa.table({"messages": pa.array([[("role", "user"), ("content", "m")], None],
                                      pa.map_(pa.string(), pa.string())),
                 "prompt": pa.array([1.5, None], pa.float64()), "completion": pa.array([True, False])})
seeds["chat_pq"] = (8, parquet(CHAT, row_group_size=2))
seeds["chat_pq_zstd"] = (8, parquet(CHAT, compression="zstd"))
seeds["chat_ipc"] = (9, ipc_bytes(CHAT, False))
seeds["chat_ipc_stream"] = (9, ipc_bytes(CHAT, True))
seeds["chat_parts_pq"] = (8, parquet(PARTS))
seeds["chat_pc_ipc"] = (9, ipc_bytes(PC, True))
seeds["chat_nested_pq"] = (10, parquet(NESTED))
seeds["chat_nested_ipc"] = (11, ipc_bytes(NESTED, False))
seeds["chat_maps_ipc"] = (9, ipc_bytes(MAPS, False))
seeds["chat_view_ipc"] = (9, ipc_bytes(pa.table({"messages": pa.array(CONVS, pa.list_(pa.struct(
    [("role", pa.string_view()), ("content", pa.string_view())])))}), True))
# damage
good = seeds["pq_none"][1]
seeds["pq_truncated"] = (0, good[: len(good) // 2])
seeds["pq_footer_len"] = (0, good[:-8] + (0x7FFFFFF0).to_bytes(4, "little") + b"PAR1")
flip = bytearray(seeds["pq_crc"][1])
flip[40] ^= 0x5A
seeds["pq_flipped"] = (0, bytes(flip))
seeds["pq_magic_only"] = (0, b"PAR1PAR1")
c = bytearray(seeds["chat_ipc_stream"][1])
c[len(c) // 2] ^= 0xFF
seeds["chat_ipc_flipped"] = (9, bytes(c))
f = seeds["ipc_file"][1]
seeds["ipc_truncated"] = (1, f[: len(f) - 20])
s = bytearray(seeds["ipc_stream"][1])
s[len(s) // 2] ^= 0xFF
seeds["ipc_flipped"] = (1, bytes(s))
for name, (cfg, data) in seeds.items():
    with open(os.path.join(OUT, "seed_" + name), "wb") as fh:
        fh.write(bytes([cfg]) + data)
print("%d seeds in %s" % (len(seeds), OUT))
