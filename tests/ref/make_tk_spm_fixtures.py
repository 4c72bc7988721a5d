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
their references are tests/ref/make_tk_unigram_fixtures.py's). Then writes
refs.jsonl.zst: doc, edge and decode rows (format and reference in
tests/ref/spm_fixtures_common.py, shared with the Unigram fixtures), plus
hf_precompiled.json and its HF tokenizers rows.
"""
import json
import os
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spm_fixtures_common import CATS, CUT, EDGE, EDGE_BYTES, NDOCS, edit, u32sha, write_refs  # noqa: E402
import spm_fixtures_common as common  # noqa: E402

DATA = os.path.join(common.HERE, "..", "data", "tk_spm")


def training_file(docs):
    return common.training_file(docs, "make_tk_spm_train.txt", 360, 40000, 44, 100000)


def train(name, path, **kw):
    args = dict(model_type="bpe", vocab_size=2000, character_coverage=0.98, num_threads=2, minloglevel=2)
    args.update(kw)
    return common.train(DATA, name, path, **args)


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


def main():
    docs, models, rows = common.build(training_file, make_models, 15, EDGE + EDGE_BYTES, 60, broken_start_every=5)
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
    write_refs(DATA, rows)


if __name__ == "__main__":
    main()
