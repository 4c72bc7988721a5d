#!/usr/bin/env python3
"""Seeds for fuzz_spm_model (tests/data/fuzz/spm_model), layout of
fuzz_tk_common.h: flags byte, u16 length of the .model, the .model, a text.

    /tmp/spm-venv/bin/python tests/data/fuzz/make_spm_seeds.py

Small BPE models cut from the tests/data/tk_spm fixtures (first pieces kept,
so every option still shows: byte fallback, user-defined, control, UNUSED
pieces, whitespace as suffix, escape off) and one with a small charsmap
compiled by sentencepiece from a normalization_rule_tsv, plus Unigram ones
(tests/data/tk_unigram: byte fallback, user-defined + control pieces,
UNUSED pieces, whitespace as suffix; and tk_spm's unigram.model), which
the Unigram engine (tokenizer/unigram.c) runs."""
import os
import struct
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "tk_spm")
FIXU = os.path.join(HERE, "..", "tk_unigram")
OUT = os.path.join(HERE, "spm_model")
TEXT = "Hello  wörld ｆｕｌｌ 123 😀 <mask> foo\xff".encode("utf-8", "surrogateescape")


def seed(name, model, text=TEXT):
    assert len(model) < 65536, (name, len(model))
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([0]) + struct.pack("<H", len(model)) + model + text)


def cut(path, keep):
    m = pb.ModelProto()
    with open(path, "rb") as f:
        m.ParseFromString(f.read())
    pieces = [p for i, p in enumerate(m.pieces) if i < keep or p.type in (2, 3, 4, 6)]
    del m.pieces[:]
    m.pieces.extend(pieces)
    m.normalizer_spec.precompiled_charsmap = b""
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in ["bpe_ident_bf", "bpe_llama", "bpe_user_ctrl", "bpe_unused", "bpe_suffix", "bpe_noescape",
                 "bpe_nodummy_ident", "unigram"]:
        m = cut(os.path.join(FIX, name + ".model"), 400)
        seed(name, m.SerializeToString())
    for name in ["uni_bf", "uni_user", "uni_unused", "uni_suffix"]:
        m = cut(os.path.join(FIXU, name + ".model"), 400)
        seed(name, m.SerializeToString(), TEXT + " @@@ abc 12 12345 ▁the<sep>".encode())
    # a small charsmap: sentencepiece compiles a rule TSV (source code points, target code points)
    d = tempfile.mkdtemp()
    tsv = os.path.join(d, "rules.tsv")
    with open(tsv, "w") as f:
        f.write("41\t61\n42\t62\nFF21\t41\nFB01\t66 69\n3000\t20\n65 301\tE9\n9\t20\n")
    txt = os.path.join(d, "t.txt")
    with open(txt, "w") as f:
        f.write("Aa Bb ﬁ ａｂ é e\u0301 a\tb\n" * 50 + "the quick brown fox jumps over the lazy dog\n" * 50)
    spm.SentencePieceTrainer.train(input=txt, model_prefix=os.path.join(d, "m"), model_type="bpe", vocab_size=60,
                                   normalization_rule_tsv=tsv, minloglevel=2, byte_fallback=False)
    with open(os.path.join(d, "m.model"), "rb") as f:
        model = f.read()
    seed("bpe_rule_tsv", model, "AB ﬁ ａｂ\u3000e\u0301 x\ty".encode())
    m = pb.ModelProto()
    m.ParseFromString(model)
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.denormalizer_spec.CopyFrom(m.normalizer_spec)
    seed("bpe_rule_tsv_denorm", m.SerializeToString(), b"  A  B \xff")


if __name__ == "__main__":
    main()
