#!/usr/bin/env python3
"""Build the SentencePiece fixtures of tests/data/tk_spm with `sentencepiece`.

    python3 -m venv /tmp/spm-venv && /tmp/spm-venv/bin/pip install sentencepiece zstandard protobuf tokenizers
    /tmp/spm-venv/bin/python tests/ref/make_tk_spm_fixtures.py [SHARED_DIR]

Trains small BPE models (vocabulary 1000-3000) on documents 300-359 of each
../shared/corpus category (documents the parity test does not use), with the
options that change encoding: normalization rule (nmt_nfkc, nfkc_cf,
identity), add_dummy_prefix, remove_extra_whitespaces, byte_fallback,
user_defined_symbols, control_symbols, split_digits, whitespace-only pieces,
treat_whitespace_as_suffix; two more are edited through the protobuf
(UNUSED pieces; escape_whitespaces off) and one Unigram model is kept (once
the refusal test's; now loaded by test_tk_spm; the Unigram fixtures and
their references are tests/ref/make_tk_unigram_fixtures.py's). Then writes refs.jsonl.zst, one JSON object per line:

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
DATA = os.path.join(HERE, "..", "data", "tk_spm")
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
CATS = ["web", "multi", "code", "en-books"]
NDOCS = 300
CUT = 100000  # characters per document


def corpus(cat):
    with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
    return [json.loads(line)["text"] for line in data.splitlines()]


def training_file(docs):
    path = os.path.join(tempfile.gettempdir(), "make_tk_spm_train.txt")  # a fixed name: it is recorded in the model
    with open(path, "w") as f:
        for cat in ["web", "multi", "code"]:
            for d in docs[cat][300:360]:
                for line in d[:40000].splitlines():
                    if line.strip():
                        f.write(line[:2000] + "\n")
        for d in docs["en-books"][40:44]:
            for line in d[:100000].splitlines():
                if line.strip():
                    f.write(line + "\n")
    return path


def train(name, path, **kw):
    prefix = os.path.join(DATA, name)
    args = dict(input=path, model_prefix=prefix, model_type="bpe", vocab_size=2000,
                character_coverage=0.98, num_threads=2, minloglevel=2)
    args.update(kw)
    spm.SentencePieceTrainer.train(**args)
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


def make_models(path):
    os.makedirs(DATA, exist_ok=True)
    models = {}
    models["bpe_nmt"] = train("bpe_nmt", path)  # nmt_nfkc, dummy prefix, remove extra ws
    models["bpe_ident_bf"] = train("bpe_ident_bf", path, normalization_rule_name="identity", byte_fallback=True,
                                   vocab_size=1500)
    models["bpe_cf_keepws"] = train("bpe_cf_keepws", path, normalization_rule_name="nfkc_cf", add_dummy_prefix=False,
                                    remove_extra_whitespaces=False, vocab_size=1000)
    models["bpe_user_ctrl"] = train("bpe_user_ctrl", path, normalization_rule_name="identity", byte_fallback=True,
                                    split_digits=True, vocab_size=1500,
                                    user_defined_symbols=["<mask>", "foo", "<sep>", "ab", "abc", "\u2581the", "@@"],
                                    control_symbols=["<ctrl1>", "<ctrl2>"])
    # Llama 2 style: identity, byte fallback, digits split, whitespace-only pieces, extra whitespace kept
    models["bpe_llama"] = train("bpe_llama", path, normalization_rule_name="identity", byte_fallback=True,
                                split_digits=True, allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
                                vocab_size=3000, max_sentencepiece_length=16, split_by_unicode_script=True)
    models["bpe_suffix"] = train("bpe_suffix", path, normalization_rule_name="identity",
                                 treat_whitespace_as_suffix=True, vocab_size=1000)
    models["bpe_nodummy_ident"] = train("bpe_nodummy_ident", path, normalization_rule_name="identity",
                                        add_dummy_prefix=False, vocab_size=1000, unk_surface="<?>")

    def unused(m):  # some merged pieces become UNUSED: encode resegments them
        k = 0
        for p in m.pieces:
            if p.type == pb.ModelProto.SentencePiece.NORMAL and len(p.piece) >= 3 and k < 40:
                if sum(map(ord, p.piece)) % 7 == 0 or p.piece in ("\u2581the", "\u2581and", "ing", "\u2581of"):
                    p.type = pb.ModelProto.SentencePiece.UNUSED
                    k += 1
    models["bpe_unused"] = edit(models["bpe_ident_bf"], os.path.join(DATA, "bpe_unused.model"), unused)

    def noescape(m):
        m.normalizer_spec.escape_whitespaces = False
    models["bpe_noescape"] = edit(models["bpe_nodummy_ident"], os.path.join(DATA, "bpe_noescape.model"), noescape)

    # a denormalizer (applied to decoded text): a small charsmap compiled by sentencepiece from a rule TSV
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "rules.tsv"), "w") as f:
        f.write("61\t41\n65\t45 45\n2E\t2E 2E 2E\nE9\t65 301\n41 42\t5A\n")
    with open(os.path.join(d, "t.txt"), "w") as f:
        f.write("abc. AB e\u00e9\n" * 20)
    spm.SentencePieceTrainer.train(input=os.path.join(d, "t.txt"), model_prefix=os.path.join(d, "r"), model_type="bpe",
                                   vocab_size=20, normalization_rule_tsv=os.path.join(d, "rules.tsv"), minloglevel=2,
                                   hard_vocab_limit=False)
    rules = pb.ModelProto()
    with open(os.path.join(d, "r.model"), "rb") as f:
        rules.ParseFromString(f.read())

    def denorm(m):
        m.denormalizer_spec.CopyFrom(rules.normalizer_spec)
        m.denormalizer_spec.add_dummy_prefix = False
        m.denormalizer_spec.remove_extra_whitespaces = False
        m.denormalizer_spec.escape_whitespaces = False
    models["bpe_denorm"] = edit(models["bpe_ident_bf"], os.path.join(DATA, "bpe_denorm.model"), denorm)

    prefix = os.path.join(DATA, "unigram")
    spm.SentencePieceTrainer.train(input=path, model_prefix=prefix, model_type="unigram", vocab_size=1200, character_coverage=0.98, hard_vocab_limit=False,
                                   normalization_rule_name="identity", num_threads=2, minloglevel=2)
    os.remove(prefix + ".vocab")
    return models


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


def make_hf_precompiled(model_path):
    """A tokenizer.json in the form of transformers' T5/Albert converters over
    bpe_nmt.model: Precompiled (its charsmap) + Replace(' {2,}', ' '),
    Metaspace, BPE with merges recovered from the piece scores."""
    import base64
    from tokenizers import Tokenizer
    m = pb.ModelProto()
    with open(model_path, "rb") as f:
        m.ParseFromString(f.read())
    vocab = {p.piece: i for i, p in enumerate(m.pieces)}
    merges = []
    for piece, i in vocab.items():  # every split into two pieces, ordered by the result's id (= score order)
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in vocab and b in vocab:
                merges.append((i, vocab[a], vocab[b], a, b))
    merges.sort()
    js = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": p.piece, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True}
                           for i, p in enumerate(m.pieces) if p.type in (2, 3)],
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Precompiled",
               "precompiled_charsmap": base64.b64encode(m.normalizer_spec.precompiled_charsmap).decode()},
              {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
          "post_processor": None,
          "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                    "vocab": vocab, "merges": [[a, b] for _, _, _, a, b in merges]}}
    out = os.path.join(DATA, "hf_precompiled.json")
    text = json.dumps(js, ensure_ascii=False)
    Tokenizer.from_str(text)  # HF accepts it
    with open(out, "w") as f:
        f.write(text)
    return out


def u32sha(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:32]


def main():
    docs = {c: corpus(c) for c in CATS}
    path = training_file(docs)
    try:
        models = make_models(path)
    finally:
        os.remove(path)
    rows = []
    rng = random.Random(15)
    for name, mp in sorted(models.items()):
        sp = spm.SentencePieceProcessor(model_file=mp)
        print(name, os.path.getsize(mp), "bytes", sp.get_piece_size(), "pieces", file=sys.stderr)
        for cat in CATS:
            for i, d in enumerate(docs[cat][:NDOCS]):
                d = d[:CUT]
                ids = sp.encode(d)
                dec = sp.decode(ids)
                rows.append({"model": name, "kind": "doc", "cat": cat, "i": i, "n": len(ids), "sha": u32sha(ids),
                             "dsha": hashlib.sha256(dec.encode()).hexdigest()[:32]})
        for e in EDGE + EDGE_BYTES:
            b = e if isinstance(e, bytes) else e.encode("utf-8", "surrogatepass")
            ids = sp.encode(e) if isinstance(e, str) else sp.encode(b)
            rows.append({"model": name, "kind": "edge", "hex": b.hex(), "ids": ids,
                         "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
        n = sp.get_piece_size()
        special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)][:300]
        space = [i for i in range(n) if sp.id_to_piece(i).startswith("\u2581")][:200]
        for k in range(60):
            ln = rng.randint(1, 12)
            pool = [special, space, list(range(n))][k % 3] or list(range(n))
            ids = [rng.choice(pool if rng.random() < 0.7 else list(range(n))) for _ in range(ln)]
            if k % 5 == 0:
                ids = [i for i in range(n) if sp.is_byte(i)][0xe2:0xe3] * 2 + ids  # a broken UTF-8 start
            rows.append({"model": name, "kind": "decode", "ids": ids,
                         "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
    from tokenizers import Tokenizer
    hp = make_hf_precompiled(models["bpe_nmt"])
    hf = Tokenizer.from_file(hp)
    hf.encode_special_tokens = True  # mkshards default mode: special-token text is ordinary text
    for cat in CATS:  # HF "Precompiled" normalizer: ids of HF tokenizers (encode only)
        for i, d in enumerate(docs[cat][:NDOCS]):
            if i % 3:
                continue
            ids = hf.encode(d[:CUT], add_special_tokens=False).ids
            rows.append({"model": "hf_precompiled", "kind": "doc", "cat": cat, "i": i, "n": len(ids), "sha": u32sha(ids)})
    for e in EDGE:
        ids = hf.encode(e, add_special_tokens=False).ids
        rows.append({"model": "hf_precompiled", "kind": "edge", "hex": e.encode().hex(), "ids": ids})
    out = "\n".join(json.dumps(r, ensure_ascii=True, separators=(",", ":")) for r in rows) + "\n"
    with open(os.path.join(DATA, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(out.encode()))
    print(len(rows), "rows", file=sys.stderr)


if __name__ == "__main__":
    main()
