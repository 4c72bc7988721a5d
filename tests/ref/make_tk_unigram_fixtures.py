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
refs.jsonl.zst in the format of tests/ref/spm_fixtures_common.py (doc, edge
and decode rows; test_tk_spm reads both), references from
`SentencePieceProcessor.encode(x)` / `decode(ids)` of sentencepiece 0.2.3
(EncodeOptimized with its score rebasing; 0.2.0 and older give different ids
in near-ties of long documents and around user-defined pieces).
"""
import os
import sys

from sentencepiece import sentencepiece_model_pb2 as pb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spm_fixtures_common import EDGE, EDGE_BYTES, edit, write_refs  # noqa: E402
import spm_fixtures_common as common  # noqa: E402

DATA = os.path.join(common.HERE, "..", "data", "tk_unigram")

EDGE_EXTRA = [
    "0" * 200, "12345678901234567890123456789", "\u2581 \u2581\u2581", "<s>text</s>", "<mask>x<sep>y<mask>",
    "unknown: \u0d9a \u16a0 \U00012000 \U0001f9ea \u4dc0", "😀😀😀 👩🏽‍💻", "x" * 5 + " " * 5 + "y" * 5,
]


def training_file(docs):
    return common.training_file(docs, "make_tk_unigram_train.txt", 340, 20000, 42, 60000)


def train(name, path, **kw):
    args = dict(model_type="unigram", vocab_size=2000, character_coverage=0.98, num_threads=2, minloglevel=2,
                hard_vocab_limit=False)
    args.update(kw)
    return common.train(DATA, name, path, **args)


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
    m["uni_unused"] = edit(m["uni_bf"], os.path.join(DATA, "uni_unused.model"), unused)
    return m


def main():
    _, _, rows = common.build(training_file, make_models, 27, EDGE + EDGE_EXTRA + EDGE_BYTES, 40)
    write_refs(DATA, rows)


if __name__ == "__main__":
    main()
