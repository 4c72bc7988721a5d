#!/usr/bin/env python3
"""Build the Unigram tokenizer.json fixtures of tests/data/tk_hf_uni and their
reference ids with HF `tokenizers` (test_tk_hf_uni = tests/test_tk_hf.c on
this directory).

    /work/venv-model/bin/python tests/ref/make_tk_hf_uni_fixtures.py [SHARED_DIR]
    (needs tokenizers, transformers, sentencepiece, protobuf, zstandard)

Fixtures, made the way the Hub's Unigram files were made:
  - transformers' converters (convert_slow_tokenizer) on the SentencePiece
    Unigram models of tests/data/tk_unigram (made by
    make_tk_unigram_fixtures.py): T5 (Precompiled nmt_nfkc charsmap, Strip,
    Replace, Metaspace, </s> appended, <extra_id_N>), XLM-R (<s> <pad> </s>
    <unk> first, <mask> last, unk_id 3), ALBERT (Replace, NFKD,
    StripAccents, Lowercase, nfkc_cf charsmap, scores - 100 for pieces
    with a digit and comma), and the generic converter
    (build_tokenizer_from_spm_proto: byte_fallback, user-defined pieces as
    an isolating Split, Metaspace split=false) with and without legacy;
  - small Unigram models trained with HF's own UnigramTrainer: Whitespace +
    NFKC/Lowercase, WhitespaceSplit + Metaspace with byte_fallback, no
    unk_token at all (HF fails texts with an unknown character: the refs
    say so with "err"), Digits/Split/Punctuation pre-tokenizers;
  - one edited vocabulary: a piece listed twice (HF keeps the last id and
    its score), and "<unk>"-like text pieces.
Each fixture is loaded back with Tokenizer.from_str before it is written.

refs.jsonl.zst rows (the format of make_tk_hf_refs.py, test_tk_hf.c reads it):
  {"tok": NAME, "mode": "plain"|"special", "text": T, "ids": [...] | "err": true}
  {"tok": NAME, "cat": CATEGORY, "doc": N, "n": COUNT, "sha": SHA} | {..., "err": true}
for the first 300 documents of each ../shared/corpus category and the edge
cases of make_tk_hf_refs.py plus the Unigram ones below; plain mode rows also
carry "dec": HF's decode of the ids.
"""
import copy
import json
import os
import sys
import types
import warnings

import zstandard
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tk_hf_refs as hfrefs  # noqa: E402

DATA = os.path.join(HERE, "..", "data", "tk_hf_uni")
SPM = os.path.join(HERE, "..", "data", "tk_unigram")
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
hfrefs.SHARED = SHARED

EDGE_EXTRA = [
    "unknown: \u0d9a \u16a0 \U00012000 \U0001f9ea \u4dc0 \u0d9a\u0d9a\u16a0", "😀😀😀 👩🏽‍💻", "<0x41><0xFF> <0x0A>x",
    "▁▁ ▁x", "<extra_id_0> <extra_id_3>x", "<mask>x<sep>y<mask>", "foo foobar abc ab 12 1234", "Ünïcödé ÀÉÎÕÜ ﬁ ''quoted'' ``x``",
    "0" * 200, "1,234,567.89 3,14", "\u0d9a" * 30 + "a" + "\u16a0" * 5, "x\u0d9ay\u0d9a\u0d9az", "\t\n\u3000 mixed  \t ws",
]


def corpus_texts(first, n):
    """Training texts: web and code only, so that most scripts of multi are unknown characters."""
    out = []
    for cat in ["web", "code"]:
        with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
        for line in data.splitlines()[first:first + n]:  # documents the parity test does not use
            out.append(json.loads(line)["text"][:20000])
    return out


def spm_tokenizer(cls, model, **attrs):
    """transformers converter `cls` on a SentencePiece .model, with a stand-in
    for the slow tokenizer (only the attributes the converter reads)."""
    from transformers import convert_slow_tokenizer as cst
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    with open(model, "rb") as f:
        proto.ParseFromString(f.read())
    pieces = {p.piece: i for i, p in enumerate(proto.pieces)}
    orig = types.SimpleNamespace(vocab_file=model, **attrs)
    orig.convert_tokens_to_ids = lambda t: pieces.get(t, attrs.get("extra", {}).get(t, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(orig).converted()


def generic_tokenizer(model, legacy):
    from transformers.convert_slow_tokenizer import SpmConverter
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    with open(model, "rb") as f:
        proto.ParseFromString(f.read())
    vocab = [(p.piece, p.score) for p in proto.pieces]
    return SpmConverter.build_tokenizer_from_spm_proto(proto, vocab, legacy=legacy)


def trained(texts, vocab_size, unk, byte_fallback, normalizer, pre_tokenizer, decoder=None, specials=()):
    tk = Tokenizer(models.Unigram())
    tk.normalizer = normalizer
    tk.pre_tokenizer = pre_tokenizer
    if decoder:
        tk.decoder = decoder
    kw = dict(vocab_size=vocab_size, special_tokens=list(specials), shrinking_factor=0.75, n_sub_iterations=2,
              max_piece_length=12)
    if unk:
        kw["unk_token"] = unk
    tr = trainers.UnigramTrainer(**kw)
    tk.train_from_iterator(texts, tr)
    if byte_fallback:  # HF's trainer has no byte_fallback option: add the 256 byte pieces, low scores
        d = json.loads(tk.to_str())
        have = {p for p, _ in d["model"]["vocab"]}
        low = min(s for _, s in d["model"]["vocab"])
        d["model"]["vocab"] += [[f"<0x{b:02X}>", low - 1.0] for b in range(256) if f"<0x{b:02X}>" not in have]
        d["model"]["byte_fallback"] = True
        tk = Tokenizer.from_str(json.dumps(d))
    return tk


def edit(tk, fn):
    d = json.loads(tk.to_str())
    fn(d)
    return Tokenizer.from_str(json.dumps(d))


def make():
    from transformers.convert_slow_tokenizer import AlbertConverter, T5Converter, XLMRobertaConverter

    texts = corpus_texts(300, 30)
    fx = {}
    extra = {f"<extra_id_{i}>": 2000 + 7 - i for i in range(8)}
    fx["t5_nmt"] = spm_tokenizer(T5Converter, os.path.join(SPM, "uni_nmt.model"), _extra_ids=8, add_prefix_space=True,
                                 extra=extra, legacy=True)
    fx["xlmr_bf"] = spm_tokenizer(XLMRobertaConverter, os.path.join(SPM, "uni_bf.model"), legacy=True)
    fx["albert_cf"] = spm_tokenizer(AlbertConverter, os.path.join(SPM, "uni_cf_keepws.model"), keep_accents=False,
                                    do_lower_case=True, legacy=True)
    fx["spm_user_bf"] = generic_tokenizer(os.path.join(SPM, "uni_user.model"), legacy=True)
    fx["spm_nmt_first"] = generic_tokenizer(os.path.join(SPM, "uni_nmt.model"), legacy=False)
    fx["hf_ws_nfkc"] = trained(texts, 1200, "<unk>", False, normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]),
                               pre_tokenizers.Whitespace(), specials=["<unk>", "<s>", "</s>"])
    fx["hf_meta_bf"] = trained(texts, 1200, "<unk>", True, None,
                               pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                        pre_tokenizers.Metaspace(prepend_scheme="never")]),
                               decoders.Sequence([decoders.Metaspace(prepend_scheme="never"), decoders.ByteFallback(),
                                                  decoders.Fuse()]),
                               specials=["<unk>", "<pad>"])
    fx["hf_no_unk"] = trained(texts, 1000, None, False, normalizers.Strip(),
                              pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                       pre_tokenizers.Punctuation(),
                                                       pre_tokenizers.Split(Regex(r"\s+"), "merged_with_next"),
                                                       pre_tokenizers.Metaspace(prepend_scheme="first", split=True)]))

    def dups(d):  # a piece listed again (the last id and its score win) and pieces that read like markup
        v = d["model"]["vocab"]
        v.append([v[10][0], v[10][1] + 3.0])
        v.append([v[20][0], -50.0])
        v += [["<unk>x", 0.5], ["\u0d9a\u0d9a", -3.0], ["<0x41>", 1.0], ["ab", -0.25]]
    fx["hf_dups"] = edit(fx["hf_ws_nfkc"], dups)
    for name, tk in fx.items():
        Tokenizer.from_str(tk.to_str())  # HF reads it back
    return fx


def main():
    os.makedirs(DATA, exist_ok=True)
    fx = make()
    docs = list(hfrefs.corpus())
    lines = []
    for name, tk in sorted(fx.items()):
        with open(os.path.join(DATA, name + ".json"), "w", encoding="utf-8") as f:
            f.write(tk.to_str(pretty=False))
        tk = Tokenizer.from_file(os.path.join(DATA, name + ".json"))
        for mode in ["plain", "special"]:
            tk.encode_special_tokens = mode == "plain"
            for text in hfrefs.edge_cases() + EDGE_EXTRA:
                rec = {"tok": name, "mode": mode, "text": text}
                try:
                    ids = tk.encode(text, add_special_tokens=False).ids
                    rec["ids"] = ids
                    if mode == "plain":
                        rec["dec"] = tk.decode(ids, skip_special_tokens=False)
                except Exception:  # HF fails the text (no unk_id)
                    rec["err"] = True
                lines.append(json.dumps(rec, ensure_ascii=False))
        tk.encode_special_tokens = True
        for cat, i, text in docs:
            try:
                ids = tk.encode(text, add_special_tokens=False).ids
                lines.append(json.dumps({"tok": name, "cat": cat, "doc": i, "n": len(ids), "sha": hfrefs.ids_sha(ids)}))
            except Exception:
                lines.append(json.dumps({"tok": name, "cat": cat, "doc": i, "err": True}))
        print(name, "done", file=sys.stderr)
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    with open(os.path.join(DATA, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(raw))


if __name__ == "__main__":
    main()
