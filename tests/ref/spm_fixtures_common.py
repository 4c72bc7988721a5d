"""What tests/ref/make_tk_spm_fixtures.py (BPE) and make_tk_unigram_fixtures.py
(Unigram) share: the corpus reader, the training file, training one model,
editing one through the protobuf, the edge cases, and the reference rows
test_tk_spm reads (one format for both), written as refs.jsonl.zst.

Rows, one JSON object per line:

  {"model": M, "kind": "doc", "cat": C, "i": I, "n": N, "sha": S, "dsha": D}
      document I of category C, cut to its first CUT characters: N ids whose
      little-endian u32 bytes have sha256 S (first 32 hex digits); D: sha256
      of sentencepiece's decode of those ids (UTF-8)
  {"model": M, "kind": "edge", "hex": T, "ids": [...], "dec": X}
      an edge case (bytes T in hex, possibly not UTF-8), its ids and the hex
      of decode(ids)
  {"model": M, "kind": "decode", "ids": [...], "dec": X}
      an arbitrary id sequence (byte pieces, control and unknown ids, leading
      spaces) and the hex of decode(ids)

Reference: sentencepiece `SentencePieceProcessor.encode(x)` (out_type=int,
no BOS/EOS) on str for UTF-8 text and on bytes for the rest, and
`decode(ids)`.
"""
import hashlib
import json
import os
import random
import struct
import sys
import tempfile

import sentencepiece as spm
import zstandard
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
CATS = ["web", "multi", "code", "en-books"]
NDOCS = 300
CUT = 100000  # characters per document

EDGE = [
    "", " ", "  ", "\t", "\n", " \n \t ", "a", " a", "a ", "  a  b  ", "hello world", "Hello  World\n\nnew para",
    "\u3000full\u3000width\u3000space", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ﬁ ligature ﬀ", "①②③ ⅷ", "㍿ ㌔",
    "é vs e\u0301 vs E\u0301\u0300", "a\u0308\u0301\u0323", "\u0301 leading mark", "한국어 텍스트", "日本語のテキスト、カタカナ ﾊﾝｶｸ",
    "中文文本，标点！", "emoji 😀👍🏽 👨‍👩‍👧 🇫🇷", "x\u200by\u200dz\ufeff", "control \x01\x02\x7f\x1b[0m", "tab\tsep\tvalues",
    "nul\x00inside", "123456789 3.14159 1e10", "<mask> <sep> foo bar foobar abc ab abcd", "<s> </s> <unk> <pad>",
    "<ctrl1> ctrl <ctrl2>", "▁ already ▁▁ escaped", "@@ @@@ user", "the the the", "x" * 300, " " * 50 + "y",
    "a" + " " * 40, "\u00a0nbsp\u00a0", "\u2028line\u2029sep", "ΑΒΓ αβγ ς", "İstanbul ǅ ß ẞ", "\U0001d400\U0001d7d8",
    "\ud7ff\ue000\uffff\U0010ffff", "מילים בעברית", "كلمات عربية", "हिन्दी पाठ", "ไทย", "Ἀθῆναι",
    "\r\n\r\nwindows\r\n", "end with space ", "many\n\n\n\nnewlines", "🙂" * 20, "\u0000", "a\u0000b\u0000",
    "\ufffd replacement", "double  space  inside", " leading", "trailing  ",
]
EDGE_BYTES = [b"\xff", b"a\xffb", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xed\xa0\x80 surrogate", b"\xf4\x90\x80\x80",
              b"\xc0\xaf overlong", b"\x80\x80\x80", b"ok \xf0\x9f\x98 cut", b"\xef\xbf\xbd\xff\xfe"]


def corpus(cat):
    with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
    return [json.loads(line)["text"] for line in data.splitlines()]


def training_file(docs, name, docs_to, doc_chars, books_to, book_chars):
    """Lines of documents 300..docs_to of web/multi/code (first doc_chars
    characters, lines cut at 2000) and en-books 40..books_to (first
    book_chars), into a file of a fixed name: the name is recorded in the
    model."""
    path = os.path.join(tempfile.gettempdir(), name)
    with open(path, "w") as f:
        for cat in ["web", "multi", "code"]:
            for d in docs[cat][300:docs_to]:
                for line in d[:doc_chars].splitlines():
                    if line.strip():
                        f.write(line[:2000] + "\n")
        for d in docs["en-books"][40:books_to]:
            for line in d[:book_chars].splitlines():
                if line.strip():
                    f.write(line + "\n")
    return path


def train(data, name, path, **args):
    """Trains data/name.model (its .vocab removed); args: the trainer's."""
    prefix = os.path.join(data, name)
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, **args)
    os.remove(prefix + ".vocab")
    return prefix + ".model"


def edit(src, dst, fn):
    m = pb.ModelProto()
    with open(src, "rb") as f:
        m.ParseFromString(f.read())
    fn(m)
    with open(dst, "wb") as f:
        f.write(m.SerializeToString())
    return dst


def u32sha(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:32]


def model_rows(name, model_path, docs, edges, rng, n_decode, broken_start_every=0):
    """The doc, edge and decode rows of one model: every category's first
    NDOCS documents cut to CUT characters, the edge cases, and n_decode random
    id sequences (every broken_start_every-th led by the byte pieces of a cut
    UTF-8 start when non-zero)."""
    rows = []
    sp = spm.SentencePieceProcessor(model_file=model_path)
    print(name, os.path.getsize(model_path), "bytes", sp.get_piece_size(), "pieces", file=sys.stderr)
    for cat in CATS:
        for i, d in enumerate(docs[cat][:NDOCS]):
            d = d[:CUT]
            ids = sp.encode(d)
            dec = sp.decode(ids)
            rows.append({"model": name, "kind": "doc", "cat": cat, "i": i, "n": len(ids), "sha": u32sha(ids),
                         "dsha": hashlib.sha256(dec.encode()).hexdigest()[:32]})
    for e in edges:
        b = e if isinstance(e, bytes) else e.encode("utf-8", "surrogatepass")
        ids = sp.encode(e) if isinstance(e, str) else sp.encode(b)
        rows.append({"model": name, "kind": "edge", "hex": b.hex(), "ids": ids,
                     "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
    n = sp.get_piece_size()
    special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)][:300]
    space = [i for i in range(n) if sp.id_to_piece(i).startswith("\u2581")][:200]
    for k in range(n_decode):
        ln = rng.randint(1, 12)
        pool = [special, space, list(range(n))][k % 3] or list(range(n))
        ids = [rng.choice(pool if rng.random() < 0.7 else list(range(n))) for _ in range(ln)]
        if broken_start_every and k % broken_start_every == 0:
            ids = [i for i in range(n) if sp.is_byte(i)][0xe2:0xe3] * 2 + ids  # a broken UTF-8 start
        rows.append({"model": name, "kind": "decode", "ids": ids,
                     "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
    return rows


def write_refs(data, rows):
    out = "\n".join(json.dumps(r, ensure_ascii=True, separators=(",", ":")) for r in rows) + "\n"
    with open(os.path.join(data, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(out.encode()))
    print(len(rows), "rows", file=sys.stderr)


def build(training_file, make_models, seed, edges, n_decode, broken_start_every=0):
    """The corpus, the models make_models trains on training_file's text (the
    file removed after), and their rows (model_rows, random ids from seed).
    Returns (docs, models, rows)."""
    docs = {c: corpus(c) for c in CATS}
    path = training_file(docs)
    try:
        models = make_models(path)
    finally:
        os.remove(path)
    rows = []
    rng = random.Random(seed)
    for name, mp in sorted(models.items()):
        rows += model_rows(name, mp, docs, edges, rng, n_decode, broken_start_every)
    return docs, models, rows
