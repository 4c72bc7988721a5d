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
# the string-field reader's decoders (ByteArrayReader::ReadBatch): delta
# encodings, data page v2 with a page per write batch, nulls in a plain column
for enc in ("DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"):
    seeds["pq_" + enc.lower()] = (0, parquet(TABLE, use_dictionary=False, column_encoding={"text": enc}))
seeds["pq_page_v2"] = (0, parquet(TABLE, data_page_version="2.0", data_page_size=64, write_batch_size=2,
                                  use_dictionary=False, compression="snappy"))
seeds["pq_nulls"] = (0, parquet(pa.table({"text": pa.array(["a", None, "b\u00e9", None], pa.string())}),
                                use_dictionary=False))
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
# Found by libFuzzer in CI (fuzz_arrow, rows mode, on 823d0d9): an IPC stream
# whose map column's keys hold a null. Making an Array of it aborted inside
# Arrow (MapArray::SetData's check) before load_rows validated it; the reader
# now validates the ArrayData first. Kept as found (first byte: the
# configuration, 9 = IPC + rows mode).
MAP_NULL_KEY = bytes.fromhex(
    "094152524f57310000ffffffff700100001000000000000a000c000600050008000a000000000104000c000000080008"
    "00000004000800000004000000030000006c000000340000000400000040ffffff00000106100000001c000000040000"
    "00000000000a000000636f6d706c6574696f6e000000ffffff6cffffff00000103100000002000000004000000000000"
    "000600000070726f6d7074000000000600080006000600000000000200a0ffffff000001011400000020000000040000"
    "000100000018000000080000006d657373616765730000000064ffffff98ffffff0000000d1800000020000000040000"
    "0002000000600000002400000007000000656e74726965730094ffffff10001400080006000700fdffffff1000100000"
    "0000000105100000001800000004000000000000000500000076616c7565000000ccffffff100014000800000007000c"
    "0000001000100000000000000510000000180000000400000000000000030000006b6579000400040004000000000000"
    "00ffffffff8801000014000000000000000c0016000600050008000c000c000000000304001800000070000000000000"
    "0000000a0018000c00040008000a000000ec000000100000000200000000000000000000000d00000000000000000000"
    "00010000000000000008000000000000000c000000000000001800000000000000000000000000000018000000000000"
    "00000000000000000018000000000000000c0000000000000028000000000000000b0000000000000038000000000000"
    "00000000000000000038000000000000000c000000000000004800000000000000050000000000000050000000000000"
    "000100000000000000580000000000000010000000000000006800000000000000000000000000000068000000000000"
    "000100000000000000000000000600000002000000000000000100000000000000020000000000000000000000000000"
    "000200000000000000000000000000000002000000000000000000000000000000020000000000000001000000000000"
    "000200000000000000000000000000000001000000000000000000000002000000020000000000000000000000040000"
    "000b00000000000000726f6c65636f6e74656e74000000000000000000040000000500000000000000757365726d0000"
    "000100000000000000000000000000f83f00000000000000000100000000000000ffffffff00000000100000000c0014"
    "00060008000c0010000c0000000000040038000000280000000400000001000000800100000000000090010000000000"
    "007000000000000000000000000000000008000800000004000800000004000000030000006c00000034000000040000"
    "0040ffffff00000106100000001c00000004000000000000000a000000636f6d706c6574696f6e000000ffffff6cffff"
    "ff0000010310000000200000000400000000000000060000008d8d6f6d70740000000006000800060006000000000002"
    "00a0ffffff000001111400000020000000040000000100000018000000080000006d657373616765730000000064ffff"
    "ff98ffffff0000000d18000000200000000400000002000000600000002400000007000000656e74726965730094ffff"
    "ff100014000800060007000c00000010001000000000000105100000001800000004000000000000000500000076616c"
    "7565000000ccffffff100014000800000007000c00000010001000000000000001100000001800000004000000000000"
    "00030000006b6579000400040004000000980100004152524f5731")
seeds["rows_map_null_key"] = (MAP_NULL_KEY[0], MAP_NULL_KEY[1:])
# Found by libFuzzer in CI (fuzz_arrow, rows mode, on e63a054): a struct
# inside a struct that is a list element (a chat column's messages whose
# tool_calls hold a function struct, as tool-calling datasets store them)
# read the filter of the root's names with no filter (NULL) - a crash, and
# with a filter, fields dropped. Kept as found (first byte: the
# configuration, 10 = Parquet + rows mode, nested paths off).
STRUCT_IN_ELEMENT = bytes.fromhex(
    "0a504152311504153e15424c150615001200001f78040000007573657209000000617373697374616e74060000007379"
    "7374656d1500152415282c150c1510150615061c36042804757365721809617373697374616e74111100000012440200"
    "0000032204000000036dd402020324001504156215324c15061500120000314c02000000686905000000796f20c3a91e"
    "000000787201001500152415282c150c1510150615061c36062805796f20c3a918026869111100000012440200000003"
    "2204000000036dc402020324001504197c35001806736368656d6115020035021804636f6e76150200350218086d6573"
    "7361676573150295064c3c000000350418046c69737415020035021807656c656d656e74150400150c25021804726f6c"
    "6525004c1c000000150c25021807636f6e74656e7425004c1c0000001608191c192c26001c150c193500061019580463"
    "6f6e76086d65737361676573046c69737407656c656d656e7404726f6c651502160c16ce0116d601266626081c360428"
    "04757365721809617373697374616e74111100192c15041500150200150015101502003c162e19260804196600020200"
    "000800000026001c150c1932000610195804636f6e76086d65737361676573046c69737407656c656d656e7407636f6e"
    "74656e741502160c16e60116ba0126ac0226de011c36062805796f20c3a918026869111100192c150415001502001500"
    "15101502003c164a19260804196600020200020600000016b4031608260816900300191c180c4152524f573a73636865"
    "6d611898032f2f2f2f2f79674241414151414141414141414b4141774142674146414167414367414141414142424141"
    "4d41414141434141494141414142414149414141414241414141414541414141454141414154502f2f2f774141415130"
    "55414141414841414141415141414141424141414146414141414151414141426a62323532414141414145442f2f2f39"
    "342f2f2f2f4141414244425141414141674141414142414141414145414141415941414141434141414147316c63334e"
    "685a32567a414141414148442f2f2f2b6f2f2f2f2f414141424452674141414167414141414241414141414941414142"
    "51414141414641414141415141414142706447567441414141414b442f2f2f2f592f2f2f2f4141414242524141414141"
    "5941414141424141414141414141414148414141415932397564475675644144492f2f2f2f4541415541416741426741"
    "484141774141414151414241414141414141414546454141414142774141414145414141414141414141415141414142"
    "796232786c414141414141514142414145414141414141414141413d3d001820706172717565742d6370702d6172726f"
    "772076657273696f6e2032362e302e31192c1c00001c0000003c03000050415231")
seeds["rows_struct_in_element"] = (STRUCT_IN_ELEMENT[0], STRUCT_IN_ELEMENT[1:])
for name, (cfg, data) in seeds.items():
    with open(os.path.join(OUT, "seed_" + name), "wb") as fh:
        fh.write(bytes([cfg]) + data)
print("%d seeds in %s" % (len(seeds), OUT))
