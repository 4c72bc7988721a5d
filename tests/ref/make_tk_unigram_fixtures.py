#!/usr/bin/env python3
"""Build the SentencePiece Unigram fixtures of tests/data/tk_unigram with `sentencepiece`.

    /work/venv-model/bin/python tests/ref/make_tk_unigram_fixtures.py [SHARED_DIR]
    (needs sentencepiece, zstandard, protobuf)

Trains small Unigram models (vocabulary 800-2000) on a slice of documents
300-359 of each ../shared/corpus category (documents the parity test does not
use), one per option that changes encoding: normalization rule (nmt_nfkc,
nfkc_cf, identity), add_dummy_prefix off, remove_extra_whitespaces off,
byte_fallback on and off, user_defined_symbols + control_symbols +
split_digits, treat_whitespace_as_suffix; one more is edited through the
protobuf (some pieces made UNUSED, which the lattice skips). Then writes
refs.jsonl.zst in the format of tests/ref/make_tk_spm_fixtures.py (doc, edge
and decode rows; test_tk_spm reads both), references from
`SentencePieceProcessor.encode(x)` / `decode(ids)` of sentencepiece 0.2.3
(EncodeOptimized with its score rebasing; 0.2.0 and older give different ids
in near-ties of long documents and around user-defined pieces).
"""
import hashlib
import json
import os
import random
import sys
import tempfile

import sentencepiece as spm
import zstandard
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tk_spm_fixtures as base  # noqa: E402  corpus reader, edge cases, id hashing

DATA = os.path.join(HERE, "..", "data", "tk_unigram")
if len(sys.argv) > 1:
    base.SHARED = sys.argv[1]
CATS = base.CATS
NDOCS = base.NDOCS
CUT = base.CUT

EDGE_EXTRA = [
    "0" * 200, "12345678901234567890123456789", "\u2581 \u2581\u2581", "<s>text</s>", "<mask>x<sep>y<mask>",
    "unknown: \u0d9a \u16a0 \U00012000 \U0001f9ea \u4dc0", "😀😀😀 👩🏽‍💻", "x" * 5 + " " * 5 + "y" * 5,
]


def training_file(docs):
    # a fixed name: it is recorded in the model
    path = os.path.join(tempfile.gettempdir(), "make_tk_unigram_train.txt")
    with open(path, "w") as f:
        for cat in ["web", "multi", "code"]:
            for d in docs[cat][300:340]:
                for line in d[:20000].splitlines():
                    if line.strip():
                        f.write(line[:2000] + "\n")
        for d in docs["en-books"][40:42]:
            for line in d[:60000].splitlines():
                if line.strip():
                    f.write(line + "\n")
    return path


def train(name, path, **kw):
    prefix = os.path.join(DATA, name)
    args = dict(input=path, model_prefix=prefix, model_type="unigram", vocab_size=2000, character_coverage=0.98,
                num_threads=2, minloglevel=2, hard_vocab_limit=False)
    args.update(kw)
    spm.SentencePieceTrainer.train(**args)
    os.remove(prefix + ".vocab")
    return prefix + ".model"


def make_models(path):
    os.makedirs(DATA, exist_ok=True)
    m = {}
    m["uni_nmt"] = train("uni_nmt", path)  # nmt_nfkc, dummy prefix, remove extra ws, no byte fallback
    m["uni_bf"] = train("uni_bf", path, normalization_rule_name="identity", byte_fallback=True, vocab_size=1500)
    m["uni_cf_keepws"] = train("uni_cf_keepws", path, normalization_rule_name="nfkc_cf", add_dummy_prefix=False,
                               remove_extra_whitespaces=False, vocab_size=1000)
    m["uni_user"] = train("uni_user", path, normalization_rule_name="identity", byte_fallback=True, split_digits=True,
                          vocab_size=1500,
                          user_defined_symbols=["<mask>", "foo", "<sep>", "ab", "abc", "\u2581the", "@@", "12"],
                          control_symbols=["<ctrl1>", "<ctrl2>"])
    m["uni_suffix"] = train("uni_suffix", path, normalization_rule_name="identity", treat_whitespace_as_suffix=True,
                            vocab_size=800, allow_whitespace_only_pieces=True, split_by_whitespace=False)

    def unused(mp):  # some pieces become UNUSED: the lattice skips them
        k = 0
        for p in mp.pieces:
            if p.type == pb.ModelProto.SentencePiece.NORMAL and len(p.piece) >= 2 and k < 60:
                if sum(map(ord, p.piece)) % 5 == 0 or p.piece in ("\u2581the", "\u2581and", "ing", "\u2581of"):
                    p.type = pb.ModelProto.SentencePiece.UNUSED
                    k += 1
    m["uni_unused"] = base.edit(m["uni_bf"], os.path.join(DATA, "uni_unused.model"), unused)
    return m


def main():
    docs = {c: base.corpus(c) for c in CATS}
    path = training_file(docs)
    try:
        models = make_models(path)
    finally:
        os.remove(path)
    rows = []
    rng = random.Random(27)
    for name, mp in sorted(models.items()):
        sp = spm.SentencePieceProcessor(model_file=mp)
        print(name, os.path.getsize(mp), "bytes", sp.get_piece_size(), "pieces", file=sys.stderr)
        for cat in CATS:
            for i, d in enumerate(docs[cat][:NDOCS]):
                d = d[:CUT]
                ids = sp.encode(d)
                dec = sp.decode(ids)
                rows.append({"model": name, "kind": "doc", "cat": cat, "i": i, "n": len(ids), "sha": base.u32sha(ids),
                             "dsha": hashlib.sha256(dec.encode()).hexdigest()[:32]})
        for e in base.EDGE + EDGE_EXTRA + base.EDGE_BYTES:
            b = e if isinstance(e, bytes) else e.encode("utf-8", "surrogatepass")
            ids = sp.encode(e) if isinstance(e, str) else sp.encode(b)
            rows.append({"model": name, "kind": "edge", "hex": b.hex(), "ids": ids,
                         "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
        n = sp.get_piece_size()
        special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i)][:300]
        space = [i for i in range(n) if sp.id_to_piece(i).startswith("\u2581")][:200]
        for k in range(40):
            ln = rng.randint(1, 12)
            pool = [special, space, list(range(n))][k % 3] or list(range(n))
            ids = [rng.choice(pool if rng.random() < 0.7 else list(range(n))) for _ in range(ln)]
            rows.append({"model": name, "kind": "decode", "ids": ids,
                         "dec": sp.decode(ids).encode("utf-8", "surrogatepass").hex()})
    out = "\n".join(json.dumps(r, ensure_ascii=True, separators=(",", ":")) for r in rows) + "\n"
    with open(os.path.join(DATA, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(out.encode()))
    print(len(rows), "rows", file=sys.stderr)


if __name__ == "__main__":
    main()
