#!/usr/bin/env python3
"""make_arrow_chat_fixtures.py OUT_DIR - chat and prompt/completion records as
Parquet and Arrow IPC columns (issue 29 with issue 28's formats), written by
pyarrow, each beside the same records as JSONL: NAME.jsonl holds
json.dumps(row, ensure_ascii=False, separators=(",", ":")) of every row of
the table (pyarrow's to_pylist), the line a writer would have written, so a
build of NAME.parquet / NAME.arrow must give the same shard bytes, manifest
accounting and reject lines as NAME.jsonl (tests/cli_arrow_chat.sh).

  chat.{parquet,arrow,jsonl}  messages = list<struct<role, content>> as the
      HF datasets store them (ultrachat_200k): system / user / assistant /
      tool turns, unicode, escapes and control bytes, special-token text in
      content, a null content, a null messages list, an empty list, an
      unknown role, a content with invalid UTF-8 (not Arrow-valid: written
      from raw buffers); 16-row row groups (snappy), the IPC file in 16-row
      batches. Also chat_zstd.parquet and chat_stream.arrow (IPC stream).
  role_int.*   role is int64: every row a chat-unknown-role reject
  parts.*      content = list<struct<type, text>> (text parts joined, image
               parts left out, a list of no text part refused)
  pc.*         prompt / completion strings (one completion null)
  pc_conv.*    TRL's conversational prompt / completion: both message lists
  nested.*     the messages under a struct column: --messages-field conv.messages
  tools.*      tool calling as HF datasets store it: messages with tool_calls =
               list<struct<id, type, function: struct<name, arguments>>> (a
               struct inside a list element inside a list element: it made
               mkshards crash before arrow_json.c's fix), tool results, and
               a tools column of function schemas (nested structs)
"""
import json
import os
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq


def conversations(n):
    out = []
    for i in range(n):
        m = [{"role": "system", "content": "be brief"}]
        for j in range(1 + i % 3):
            m.append({"role": "user", "content": f"question {i} {j} h\u00e9llo \u4e16\u754c \U0001F600 " + "why " * (i % 6)})
            if i % 5 == 2:
                m.append({"role": "assistant", "content": f"calling a tool {i}"})
                m.append({"role": "tool", "content": '{"result": %d}' % i})
            m.append({"role": "assistant", "content": f"answer {i} {j}\n\t\"quoted\" \\ \x01 " + "because " * (i % 8)})
        if i % 11 == 4:
            m[-1]["content"] += " <|im_end|> special-token text"
        out.append(m)
    out[3][1]["content"] = None  # content null: chat-bad-content
    out[7] = None  # messages null: chat-not-list
    out[9] = []  # an empty conversation: no target token
    out[12][1]["role"] = "bot"  # chat-unknown-role
    return out


MSG = pa.struct([("role", pa.string()), ("content", pa.string())])


def with_bad_utf8(col, row):
    """col (list<struct<role, content>>) with row's first content replaced by
    invalid UTF-8, built from buffers (pyarrow validates strings it makes)."""
    flat = col.flatten()
    roles, contents = flat.field("role"), flat.field("content")
    vals = [None if v is None else v.encode() for v in contents.to_pylist()]
    first = col.offsets[row].as_py()
    vals[first] = b"bad \xff\xfe utf-8"
    raw = pa.array(vals, pa.binary())
    bufs = raw.buffers()
    bad = pa.Array.from_buffers(pa.string(), len(raw), bufs, null_count=raw.null_count)
    st = pa.StructArray.from_arrays([roles, bad], fields=list(MSG))
    return pa.ListArray.from_arrays(col.offsets, st, mask=col.is_null())


def write(t, out, name, rows=16, codec="snappy", ipc_kinds=("file",)):
    pq.write_table(t, os.path.join(out, name + ".parquet"), row_group_size=rows, compression=codec)
    for k in ipc_kinds:
        path = os.path.join(out, name + (".arrow" if k == "file" else "_stream.arrow"))
        with pa.OSFile(path, "wb") as f:
            w = ipc.new_file(f, t.schema) if k == "file" else ipc.new_stream(f, t.schema)
            for b in t.to_batches(max_chunksize=rows):
                w.write_batch(b)
            w.close()
    with open(os.path.join(out, name + ".jsonl"), "wb") as f:
        n = len(t)
        for i in range(n):
            row = t.slice(i, 1)
            try:
                line = json.dumps(row.to_pylist()[0], ensure_ascii=False, separators=(",", ":")).encode()
            except UnicodeDecodeError:  # the invalid UTF-8 row: its bytes as they are
                line = row_json_bytes(row)
            f.write(line + b"\n")


def row_json_bytes(row):
    """A row whose strings are not all UTF-8, written as JSON with the bytes as they are."""
    def enc(v):
        if v is None:
            return b"null"
        if isinstance(v, bytes):
            esc = json.dumps(v.decode("latin-1"), ensure_ascii=False)[1:-1].encode("latin-1")
            return b'"' + esc + b'"'
        if isinstance(v, dict):
            return b"{" + b",".join(enc(k.encode()) + b":" + enc(x) for k, x in v.items()) + b"}"
        if isinstance(v, list):
            return b"[" + b",".join(enc(x) for x in v) + b"]"
        return json.dumps(v).encode()
    cast = row.cast(pa.schema([(f.name, binary_type(f.type)) for f in row.schema]))
    return enc(cast.to_pylist()[0])


def binary_type(t):
    if pa.types.is_string(t):
        return pa.binary()
    if pa.types.is_list(t):
        return pa.list_(binary_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, binary_type(f.type)) for f in t])
    return t


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    conv = conversations(150)
    col = pa.array(conv, pa.list_(MSG))
    col = with_bad_utf8(col, 20)
    chat = pa.table({"messages": col})
    write(chat, out, "chat", ipc_kinds=("file", "stream"))
    pq.write_table(chat, os.path.join(out, "chat_zstd.parquet"), row_group_size=40, compression="zstd")

    ri = pa.array([[{"role": 1, "content": "hi"}, {"role": 2, "content": "yo"}]] * 5,
                  pa.list_(pa.struct([("role", pa.int64()), ("content", pa.string())])))
    write(pa.table({"messages": ri}), out, "role_int")

    part = pa.struct([("type", pa.string()), ("text", pa.string())])
    pmsg = pa.struct([("role", pa.string()), ("content", pa.list_(part))])
    rows = []
    for i in range(20):
        rows.append([
            {"role": "user", "content": [{"type": "text", "text": f"look {i}"}, {"type": "image", "text": None},
                                         {"type": "text", "text": "and tell"}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"I see {i}"}]},
        ])
    rows[5][0]["content"] = [{"type": "image", "text": None}]  # no text part: chat-bad-content
    write(pa.table({"messages": pa.array(rows, pa.list_(pmsg))}), out, "parts")

    prompts = [f"prompt {i} " + "word " * (i % 9) for i in range(60)]
    comps = [f"completion {i} " + "done " * (i % 7) for i in range(60)]
    comps[10] = None  # not a string: chat-bad-content
    write(pa.table({"prompt": pa.array(prompts), "completion": pa.array(comps)}), out, "pc")

    pcc = [[m for m in c if m["role"] != "assistant"][:2] if c else None for c in conv[:60]]
    cc = [[{"role": "assistant", "content": f"final {i}"}] for i in range(60)]
    pcc[7] = [{"role": "user", "content": "q"}]
    pcc[9] = [{"role": "user", "content": "q2"}]
    write(pa.table({"prompt": pa.array(pcc, pa.list_(MSG)), "completion": pa.array(cc, pa.list_(MSG))}), out,
          "pc_conv")

    nested = pa.array([{"messages": c} for c in conv[:40]], pa.struct([("messages", pa.list_(MSG))]))
    write(pa.table({"conv": nested}), out, "nested")

    fn = pa.struct([("name", pa.string()), ("arguments", pa.string())])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", fn)])
    tmsg = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call)),
                      ("tool_call_id", pa.string())])
    props = pa.struct([("city", pa.struct([("type", pa.string()), ("description", pa.string())]))])
    tool = pa.struct([("type", pa.string()), ("function", pa.struct([
        ("name", pa.string()), ("description", pa.string()),
        ("parameters", pa.struct([("type", pa.string()), ("properties", props)]))]))])
    trows, tools = [], []
    for i in range(24):
        calls = [{"id": f"call{i:05d}", "type": "function",
                  "function": {"name": "weather", "arguments": json.dumps({"city": f"Zürich {i}"}, ensure_ascii=False)}}]
        if i % 3 == 0:  # parallel calls
            calls.append({"id": f"call{i:05d}b", "type": "function",
                          "function": {"name": "weather", "arguments": json.dumps({"city": "東京"}, ensure_ascii=False)}})
        msgs = [{"role": "user", "content": f"weather {i}?", "tool_calls": None, "tool_call_id": None},
                {"role": "assistant", "content": "", "tool_calls": calls, "tool_call_id": None}]
        msgs += [{"role": "tool", "content": f"{20 + i} C", "tool_calls": None, "tool_call_id": c["id"]}
                 for c in calls]
        msgs.append({"role": "assistant", "content": f"It is {20 + i} C.", "tool_calls": None, "tool_call_id": None})
        trows.append(msgs)
        tools.append([{"type": "function", "function": {"name": "weather", "description": "the weather \"now\"",
                                                        "parameters": {"type": "object", "properties": {
                                                            "city": {"type": "string", "description": "a city"}}}}}])
    write(pa.table({"messages": pa.array(trows, pa.list_(tmsg)), "tools": pa.array(tools, pa.list_(tool))}), out,
          "tools")


if __name__ == "__main__":
    main()
