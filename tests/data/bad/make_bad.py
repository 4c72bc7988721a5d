#!/usr/bin/env python3
"""Regenerate tests/data/bad/* (one small input per lint rule, plus combined
files) and expected.tsv: file, options, rule, line, offset (of the record in
the decompressed input). Run from anywhere; needs the `zstd` CLI.

expected.tsv columns: file<TAB>opts<TAB>rule<TAB>line<TAB>offset
opts: comma list of key=value for the test driver (sep, maxrec, maxdoc, tok,
L, outmin, longline, bpt) or '-'. Every rule a file triggers is listed: the
test fails on any other finding."""
import base64, json, os, random, subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
rows = []
rng = random.Random(1234)

def words(n, seed):
    r = random.Random(seed)
    vocab = ["the", "river", "stone", "quiet", "lantern", "over", "a", "city", "of", "glass",
             "morning", "walks", "slowly", "under", "bright", "north", "wind", "paper", "house", "sings"]
    return " ".join(r.choice(vocab) for _ in range(n))

def jl(objs):
    """lines (bytes) of a JSONL file; returns data and the offset/line of each record."""
    data = b""
    locs = []
    for i, o in enumerate(objs):
        line = o if isinstance(o, bytes) else json.dumps(o, ensure_ascii=False).encode()
        locs.append((i + 1, len(data)))
        data += line + b"\n"
    return data, locs

def put(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)

def expect(name, opts, rule, line, off):
    rows.append((name, opts, rule, str(line), str(off)))

def simple(name, bad_obj, rule, opts="-", before=2, after=1):
    objs = [{"text": words(12, 100 + i)} for i in range(before)] + [bad_obj] + \
           [{"text": words(12, 200 + i)} for i in range(after)]
    data, locs = jl(objs)
    put(name, data)
    expect(name, opts, rule, *locs[before])

simple("json_malformed.jsonl", b'{"text": "unterminated}', "json-malformed")
simple("field_missing.jsonl", {"body": words(10, 7)}, "field-missing")
simple("field_not_string.jsonl", {"text": ["a", "list"]}, "field-not-string")
simple("nul_byte.jsonl", {"text": "before\u0000after " + words(5, 8)}, "nul-byte")
simple("control_char.jsonl", {"text": "bell\u0007here " + words(5, 9)}, "control-char")
simple("empty_doc.jsonl", {"text": "  \n\t "}, "empty-doc")
simple("special_token.jsonl", {"text": words(6, 10) + " <|endoftext|> " + words(6, 11)}, "special-token")
simple("lone_surrogate.jsonl", b'{"text": "broken \\ud83d pair here"}', "json-lone-surrogate")
simple("doc_too_long_bytes.jsonl", {"text": words(60, 12)}, "doc-too-long", "maxdoc=200")
simple("doc_too_long_tokens.jsonl", {"text": words(80, 13)}, "doc-too-long", "tok=1,L=64")
simple("long_run.jsonl", {"text": "see " + "".join(rng.choice("ab.c!d,e;") for _ in range(5000)) + " end"},
       "long-run")
b64 = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(2400))).decode()
simple("blob_base64.jsonl", {"text": "image: " + b64 + " done"}, "blob")
# invalid UTF-8 inside a JSON line (the JSON parser rejects it: reported as utf8-invalid)
simple("utf8_invalid.jsonl", b'{"text": "caf\xe9 au lait"}', "utf8-invalid")
# low bytes per token: ASCII junk where letters, digits and punctuation
# alternate, so nearly every byte becomes its own token
junk = "".join(rng.choice("aq7;]Z,2!x") + ("" if (i + 1) % 24 else " ") for i in range(2400))
simple("low_bytes_per_token.jsonl", {"text": junk}, "low-bytes-per-token", "tok=1")
# tokenizer-limit: the audit's document for a tokenizer.json whose Split regex
# is (?:x+x+)+y|. (runs of 22 x and a z; test_lint writes that tokenizer)
simple("tokenizer_limit.jsonl", {"text": "".join("z" if i % 23 == 22 else "x" for i in range(2000))},
       "tokenizer-limit", "tok=hostile")

# duplicate: record 4 repeats record 1
objs = [{"text": words(12, 300 + i)} for i in range(3)] + [{"text": words(12, 300)}]
data, locs = jl(objs)
put("duplicate.jsonl", data)
expect("duplicate.jsonl", "-", "duplicate", *locs[3])

# outlier: one record ~200x the median
objs = [{"text": words(10, 400 + i)} for i in range(20)]
objs.insert(13, {"text": words(2500, 499)})
data, locs = jl(objs)
put("outlier.jsonl", data)
expect("outlier.jsonl", "outmin=1000", "outlier-doc", *locs[13])

# txt inputs
put("utf8_invalid.txt", b"valid start\nthen \xff\xfe bytes\n")
expect("utf8_invalid.txt", "-", "utf8-invalid", 1, 0)
put("bom.txt", b"\xef\xbb\xbf" + words(10, 500).encode() + b"\n")
expect("bom.txt", "-", "bom", 1, 0)
put("mixed_newlines.txt", b"one\r\ntwo\r\nthree\nfour\n")
expect("mixed_newlines.txt", "-", "mixed-newlines", 1, 0)
put("long_line.txt", (words(5, 501) + "\n" + words(400, 502) + "\n").encode())
expect("long_line.txt", "longline=1000", "long-line", 1, 0)
hexdump = "".join("%08x  " % (i * 16) + " ".join("%02x" % rng.getrandbits(8) for _ in range(16)) + "\n"
                  for i in range(40))
put("blob_hexdump.txt", hexdump.encode())
expect("blob_hexdump.txt", "-", "blob", 1, 0)
# record too large, txt line mode: line 3 is 300 bytes with a 128-byte limit
lines = [words(5, 600).encode(), words(5, 601).encode(), ("x" * 10 + " ").encode() * 27 + b"end",
         words(5, 602).encode()]
data = b"\n".join(lines) + b"\n"
put("record_too_large.txt", data)
expect("record_too_large.txt", "sep=line,maxrec=128", "record-too-large", 3, len(lines[0]) + len(lines[1]) + 2)

# zstd: frame 1 complete (2 records), frame 2 truncated
# chat records (--format chat; issue 28): two good conversations, the bad one, one more
def conv(seed, n=1):
    msgs = []
    for k in range(n):
        msgs += [{"role": "user", "content": words(6, seed * 10 + 2 * k)},
                 {"role": "assistant", "content": words(6, seed * 10 + 2 * k + 1)}]
    return {"messages": msgs}

def chat(name, bad_obj, rules, opts):
    objs = [conv(300 + i) for i in range(2)] + [bad_obj] + [conv(400)]
    data, locs = jl(objs)
    put(name, data)
    for rule in rules:
        expect(name, opts, rule, *locs[2])

chat("chat_unknown_role.jsonl", {"messages": [{"role": "robot", "content": "beep"}]}, ["chat-unknown-role"], "fmt=chat")
chat("chat_bad_content.jsonl", {"messages": [{"role": "user", "content": 7}]}, ["chat-bad-content"], "fmt=chat")
# mistral's template raises on a system message without a user turn to fold it into
chat("chat_template_refused.jsonl", {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]},
     ["chat-template-refused"], "fmt=chat,tmpl=mistral")
chat("chat_assistant_twice.jsonl", {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
                                                 {"role": "assistant", "content": "b"}]},
     ["chat-assistant-twice"], "fmt=chat,tmpl=mistral")
chat("chat_empty_content.jsonl", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " \n"}]},
     ["chat-empty-content"], "fmt=chat")
chat("chat_no_assistant.jsonl", {"messages": [{"role": "user", "content": "anyone?"}]}, ["chat-no-assistant"], "fmt=chat")
chat("chat_system_not_first.jsonl", {"messages": [{"role": "user", "content": "q"}, {"role": "system", "content": "s"},
                                                  {"role": "assistant", "content": "a"}]},
     ["chat-system-not-first"], "fmt=chat")
chat("chat_over_seq_len.jsonl", conv(500, 4), ["chat-over-seq-len"], "fmt=chat,tok=qwen2,tmpl=chatml,L=40")
# a special token's text in a message: the tokenizer's (chat-special-text) and the <|...|> shape (special-token)
chat("chat_special_text.jsonl", {"messages": [{"role": "user", "content": "say <|im_start|> now"},
                                              {"role": "assistant", "content": "no"}]},
     ["special-token", "chat-special-text"], "fmt=chat,tok=qwen2")
chat("chat_non_text_part.jsonl", {"messages": [{"role": "user", "content": [{"type": "text", "text": "see"},
                                                                            {"type": "image_url", "image_url": "x"}]},
                                               {"role": "assistant", "content": "a cat"}]},
     ["chat-non-text-part"], "fmt=chat")

def zst(b):
    return subprocess.run(["zstd", "-q", "-c", "--no-check"], input=b, stdout=subprocess.PIPE, check=True).stdout
part1, _ = jl([{"text": words(8, 700)}, {"text": words(8, 701)}])
part2, _ = jl([{"text": words(8, 702 + i)} for i in range(30)])
z2 = zst(part2)
put("zstd_truncated.jsonl.zst", zst(part1) + z2[: len(z2) // 2])
expect("zstd_truncated.jsonl.zst", "-", "zstd-corrupt", 3, len(part1))
zc = bytearray(zst(part2))
for i in range(12, min(len(zc), 40)):
    zc[i] ^= 0xA5
put("zstd_corrupt.jsonl.zst", bytes(zc))
expect("zstd_corrupt.jsonl.zst", "-", "zstd-corrupt", 1, 0)

# combined: several rules in one file
objs = [{"text": words(10, 800)},                       # 1 ok
        b'{"text": 42}',                                # 2 field-not-string
        {"text": ""},                                   # 3 empty-doc
        {"text": words(10, 800)},                       # 4 duplicate of 1
        b'not json at all',                             # 5 json-malformed
        {"text": "tab\tok but escape \u001b[0m " + words(4, 801)},  # 6 control-char
        {"meta": {"text": "nested"}},                   # 7 field-missing
        {"text": "<|im_start|>user " + words(5, 802)},  # 8 special-token
        ]
data, locs = jl(objs)
put("combined.jsonl", data)
for idx, rule in [(1, "field-not-string"), (2, "empty-doc"), (3, "duplicate"), (4, "json-malformed"),
                  (5, "control-char"), (6, "field-missing"), (7, "special-token")]:
    expect("combined.jsonl", "-", rule, *locs[idx])
# combined, compressed, with a BOM on the first line and CRLF endings
data2 = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
put("combined_bom_crlf.jsonl.zst", zst(data2))
off = 0
locs2 = []
for i, l in enumerate(data2.split(b"\r\n")[:-1]):
    locs2.append((i + 1, off))
    off += len(l) + 2
for idx, rule in [(0, "bom"), (1, "field-not-string"), (2, "empty-doc"), (3, "duplicate"), (4, "json-malformed"),
                  (5, "control-char"), (6, "field-missing"), (7, "special-token")]:
    expect("combined_bom_crlf.jsonl.zst", "-", rule, *locs2[idx])

with open(os.path.join(HERE, "expected.tsv"), "w") as f:
    f.write("# file\topts\trule\tline\toffset   (generated by make_bad.py)\n")
    for r in rows:
        f.write("\t".join(r) + "\n")

# clean corpus: varied, valid documents that must produce no finding
clean = os.path.join(HERE, "..", "clean")
os.makedirs(clean, exist_ok=True)
docs = []
for i in range(40):
    docs.append({"text": words(30 + (i * 7) % 50, 900 + i) + ".\n\n" + words(20, 950 + i) + ".", "id": i})
docs.append({"text": "Ünïcödé text: 日本語の文章、한국어 문장, русский текст, עברית, ελληνικά. " + words(10, 990)})
docs.append({"text": "def f(x):\n    return {'a': x, 'b': [1, 2, 3]}  # code is fine\n"})
docs.append({"text": "Tabs\tand\tform feeds\f are allowed; so is a short hash 3f2a9c1e in prose."})
data, _ = jl(docs)
with open(os.path.join(clean, "docs.jsonl"), "wb") as f:
    f.write(data)
with open(os.path.join(clean, "docs2.jsonl.zst"), "wb") as f:
    f.write(zst(jl([{"text": words(40, 1000 + i)} for i in range(10)])[0]))
with open(os.path.join(clean, "essay.txt"), "w") as f:
    f.write("\n\n".join(words(60, 1100 + i) for i in range(5)) + "\n")
print("wrote", len(rows), "expectations")
