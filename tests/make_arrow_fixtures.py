#!/usr/bin/env python3
"""make_arrow_fixtures.py IN.jsonl OUT_DIR - the Parquet and Arrow IPC inputs
of tests/cli_arrow.sh (issue 29), written by pyarrow from the documents of a
JSONL file (its "text" strings, in order), so every fixture holds exactly the
documents of IN.jsonl and must build to the same shard bytes:

  codec/{none,snappy,zstd,gzip,brotli,lz4}.parquet   every Parquet codec pyarrow
                                                     writes, 7-row row groups
  types/{large_string,string_view,dict}.parquet       other string columns
  folder/part-{0,1,2}.parquet                          a dataset split in 3 files
                                                     (folder_jsonl/: the same as JSONL)
  struct.parquet          text at meta.body (--field meta.body), plus a column
                          "text" of other strings that must not be read
  ipc/{file,stream,file_zstd,stream_lz4}.arrow        IPC file and stream format
                          (what datasets caches), uncompressed / zstd / lz4
  ipc/large.arrow         large_string in an IPC stream (datasets' own type)
  ipc/dict.arrow          dictionary<int32, string> in an IPC file
  nulls.parquet / nulls.arrow   the documents with a null after every 3rd
                          (expected: the same shards, one missing-field reject
                          per null); nulls.count holds how many
  nullstruct.parquet      meta.body with null structs and null strings mixed
  notstring.parquet       "text" is int64: every row not a string
  empty.parquet           0 rows, with a schema
  wide.parquet            one row group of every row (row groups = 1)
  bignull.parquet         3000 rows in one row group, row 2500 null
OUT_DIR/docs.count holds the number of documents, OUT_DIR/docs.jsonl the
documents themselves (the JSONL every fixture is compared with).
make_arrow_fixtures.py IN.jsonl OUT_DIR --split FILES ROWS: only
OUT_DIR/parquet/part-K.parquet, the documents in FILES files of ROWS-row row
groups, and OUT_DIR/jsonl/part-K.jsonl, the same files as JSONL.
"""
import json
import os
import re
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq


def write_jsonl(docs, path):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            if d is not None:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")


def split(docs, out, files, rows):
    """OUT/parquet/part-K.parquet: the documents in FILES files of ROWS-row
    row groups; OUT/jsonl/part-K.jsonl the same files as JSONL."""
    for d in ("parquet", "jsonl"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    n = len(docs)
    for k in range(files):
        part = docs[k * n // files:(k + 1) * n // files]
        pq.write_table(pa.table({"text": pa.array(part, pa.string())}),
                       os.path.join(out, "parquet", "part-%d.parquet" % k), row_group_size=rows, compression="zstd")
        write_jsonl(part, os.path.join(out, "jsonl", "part-%d.jsonl" % k))


def main():
    src, out = sys.argv[1], sys.argv[2]
    # a lone surrogate escape cannot be UTF-8: U+FFFD, as mkshards' JSONL
    # reader reads it; OUT_DIR/docs.jsonl holds the documents as written
    docs = [re.sub("[\ud800-\udfff]", "\ufffd", json.loads(line)["text"])
            for line in open(src, encoding="utf-8") if line.strip()]
    if len(sys.argv) == 6 and sys.argv[3] == "--split":  # --split FILES ROWS
        split(docs, out, int(sys.argv[4]), int(sys.argv[5]))
        return
    os.makedirs(out, exist_ok=True)
    write_jsonl(docs, os.path.join(out, "docs.jsonl"))
    os.makedirs(out, exist_ok=True)
    for d in ("codec", "types", "folder", "folder_jsonl", "ipc"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    n = len(docs)
    ids = pa.array(range(n), pa.int64())
    text = pa.array(docs, pa.string())
    table = pa.table({"id": ids, "text": text})
    for codec in ("none", "snappy", "zstd", "gzip", "brotli", "lz4"):
        pq.write_table(table, os.path.join(out, "codec", codec + ".parquet"), compression=codec,
                       row_group_size=7, write_page_checksum=True)
    pq.write_table(pa.table({"id": ids, "text": pa.array(docs, pa.large_string())}),
                   os.path.join(out, "types", "large_string.parquet"), row_group_size=5)
    pq.write_table(pa.table({"text": pa.array(docs, pa.string_view())}),
                   os.path.join(out, "types", "string_view.parquet"), row_group_size=5)
    pq.write_table(pa.table({"text": pa.array(docs).dictionary_encode()}),
                   os.path.join(out, "types", "dict.parquet"), row_group_size=4)
    # the other BYTE_ARRAY encodings and data page v2 with pages of a few
    # rows (the string-field reader reads one page at a time)
    for enc in ("DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"):
        pq.write_table(pa.table({"text": text}), os.path.join(out, "types", enc.lower() + ".parquet"),
                       use_dictionary=False, column_encoding={"text": enc}, row_group_size=9)
    pq.write_table(table, os.path.join(out, "types", "page_v2.parquet"), data_page_version="2.0",
                   data_page_size=2048, write_batch_size=3, compression="zstd", row_group_size=11)
    # one row group, one uncompressed plain page of about 4 MB, fewer rows
    # than a batch: the memory Arrow holds for it is the page, not the page
    # and a copy of every value (cli_arrow checks the lint line's figure)
    one = [(docs[i % n] + " ") * (1 + 8000 // (len(docs[i % n]) + 1)) for i in range(500)]
    pq.write_table(pa.table({"text": pa.array(one, pa.string())}), os.path.join(out, "onepage.parquet"),
                   compression="none", use_dictionary=False, data_page_size=1 << 26, row_group_size=500)
    open(os.path.join(out, "onepage.bytes"), "w").write("%d\n" % sum(len(x.encode()) for x in one))
    cut = [0, n // 3, 2 * n // 3, n]
    for k in range(3):
        pq.write_table(table.slice(cut[k], cut[k + 1] - cut[k]), os.path.join(out, "folder", "part-%d.parquet" % k),
                       row_group_size=3)
        write_jsonl(docs[cut[k]:cut[k + 1]], os.path.join(out, "folder_jsonl", "part-%d.jsonl" % k))
    meta = pa.StructArray.from_arrays([pa.array(docs), pa.array(["u%d" % i for i in range(n)])], ["body", "url"])
    pq.write_table(pa.table({"text": pa.array(["not this %d" % i for i in range(n)]), "meta": meta}),
                   os.path.join(out, "struct.parquet"), row_group_size=6)
    for name, compression, writer in (("file", None, ipc.new_file), ("stream", None, ipc.new_stream),
                                      ("file_zstd", "zstd", ipc.new_file), ("stream_lz4", "lz4", ipc.new_stream)):
        opts = ipc.IpcWriteOptions(compression=compression)
        with writer(os.path.join(out, "ipc", name + ".arrow"), table.schema, options=opts) as w:
            for b in table.to_batches(max_chunksize=4):
                w.write_batch(b)
    lt = pa.table({"text": pa.array(docs, pa.large_string())})
    with ipc.new_stream(os.path.join(out, "ipc", "large.arrow"), lt.schema) as w:
        for b in lt.to_batches(max_chunksize=6):
            w.write_batch(b)
    dt = pa.table({"text": pa.array(docs).dictionary_encode()})
    with ipc.new_file(os.path.join(out, "ipc", "dict.arrow"), dt.schema) as w:
        w.write_table(dt)
    # nulls: a null after every third document
    with_nulls = []
    for i, d in enumerate(docs):
        with_nulls.append(d)
        if i % 3 == 2:
            with_nulls.append(None)
    nt = pa.table({"text": pa.array(with_nulls, pa.string())})
    pq.write_table(nt, os.path.join(out, "nulls.parquet"), row_group_size=5, compression="zstd")
    with ipc.new_stream(os.path.join(out, "nulls.arrow"), nt.schema) as w:
        for b in nt.to_batches(max_chunksize=5):
            w.write_batch(b)
    open(os.path.join(out, "nulls.count"), "w").write("%d\n" % (len(with_nulls) - n))
    # null structs and null strings inside structs: rows 0, 3, 6... are real
    bodies, valid = [], []
    for i, d in enumerate(with_nulls):
        bodies.append(d)
        valid.append(True)
    structs = pa.StructArray.from_arrays([pa.array(bodies, pa.string())], ["body"],
                                         mask=pa.array([i % 7 == 5 for i in range(len(bodies))]))
    pq.write_table(pa.table({"meta": structs}), os.path.join(out, "nullstruct.parquet"), row_group_size=4)
    kept = sum(1 for i, b in enumerate(bodies) if b is not None and i % 7 != 5)
    open(os.path.join(out, "nullstruct.count"), "w").write("%d %d\n" % (kept, len(bodies) - kept))
    pq.write_table(pa.table({"text": ids}), os.path.join(out, "notstring.parquet"))
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), os.path.join(out, "empty.parquet"))
    pq.write_table(table, os.path.join(out, "wide.parquet"))
    # one 3000-row row group (read in batches of 1024) with a null at row 2500
    big = [None if i == 2500 else "document %d" % i for i in range(3000)]
    pq.write_table(pa.table({"text": pa.array(big, pa.string())}), os.path.join(out, "bignull.parquet"))
    open(os.path.join(out, "docs.count"), "w").write("%d\n" % n)


if __name__ == "__main__":
    main()
