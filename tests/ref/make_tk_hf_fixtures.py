#!/usr/bin/env python3
"""Build the tokenizer.json fixtures of tests/data/tk_hf with HF `tokenizers`.

    python3 tests/ref/make_tk_hf_fixtures.py [SHARED_DIR] [--only=NAME,...]   # then make_tk_hf_refs.py

One small byte-level BPE (600 ids) is trained with HF's BpeTrainer on the
first documents of ../shared/corpus; each fixture is that model with other
components, so that together they exercise every supported normalizer,
pre-tokenizer, behavior, option and added-token flag. Every fixture is
loaded back with Tokenizer.from_str (HF accepts it) before it is written.
"""
import copy
import json
import os
import sys

import zstandard
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tk_hf")
ARGS = [a for a in sys.argv[1:] if not a.startswith("--only=")]
ONLY = [n for a in sys.argv[1:] if a.startswith("--only=") for n in a[7:].split(",")]  # --only=NAME,...: just these
SHARED = ARGS[0] if ARGS else os.path.join(HERE, "..", "..", "..", "shared")


def texts():
    out = []
    for cat in ["web", "multi", "code"]:
        with open(os.path.join(SHARED, "corpus", cat + ".jsonl.zst"), "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
        for line in data.splitlines()[300:340]:  # documents the parity test does not use
            out.append(json.loads(line)["text"][:20000])
    return out


def split(regex, behavior="Isolated", invert=False, string=False):
    return {"type": "Split", "pattern": {"String" if string else "Regex": regex}, "behavior": behavior,
            "invert": invert}


def bytelevel(prefix=False, regex=False):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}


def seq(*p):
    return {"type": "Sequence", "pretokenizers": list(p)}


def nseq(*n):
    return {"type": "Sequence", "normalizers": list(n)}


def added(content, id_, special, normalized, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


DEEPSEEK = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
            " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def variants():
    v = {}
    v["bl_nfkc_lower"] = dict(normalizer=nseq({"type": "NFKC"}, {"type": "Lowercase"}),
                              pre_tokenizer=bytelevel(prefix=True, regex=True))
    v["bl_nfd_strip_replace"] = dict(
        normalizer=nseq({"type": "NFD"}, {"type": "Strip", "strip_left": True, "strip_right": True},
                        {"type": "Replace", "pattern": {"String": "  "}, "content": " "},
                        {"type": "Replace", "pattern": {"Regex": "\\d+"}, "content": "#"},
                        {"type": "Prepend", "prepend": "@"}),
        pre_tokenizer=seq(split(QWEN), bytelevel()))
    v["bl_nfc_deepseek"] = dict(
        normalizer={"type": "NFC"},
        pre_tokenizer=seq(split("\\p{N}{1,3}"), split("[一-龥\u3040-ゟ゠-ヿ]+"), split(DEEPSEEK), bytelevel()))
    v["bl_digits_punct"] = dict(
        pre_tokenizer=seq({"type": "Digits", "individual_digits": True}, {"type": "Punctuation", "behavior": "Contiguous"},
                          split("\\s+", "MergedWithNext"), bytelevel()))
    v["bl_behaviors"] = dict(
        pre_tokenizer=seq(split("[A-Z]", "MergedWithPrevious"), split("\\p{N}+", "Contiguous"),
                          split(" ", "MergedWithPrevious", invert=True, string=True),
                          split("x", "Removed"), {"type": "Digits", "individual_digits": False}, bytelevel()))
    v["bl_invert_removed"] = dict(pre_tokenizer=seq(split("\\p{L}+|\\p{N}+", "Removed", invert=True),
                                                    bytelevel(prefix=True)))
    v["bl_wssplit"] = dict(pre_tokenizer=seq({"type": "WhitespaceSplit"}, bytelevel(regex=True)))
    v["bl_whitespace"] = dict(pre_tokenizer=seq({"type": "Whitespace"}, bytelevel()))
    v["bl_anchors"] = dict(pre_tokenizer=seq(split("^\\s+|\\s+$|(?i:the|and)|[^\\s]+"), bytelevel()))
    v["bl_added"] = dict(normalizer={"type": "Lowercase"}, pre_tokenizer=bytelevel(regex=True),
                         added=[("Hello", False, True), ("<tag>", False, False), ("ERROR", False, False),
                                ("<|endoftext|>", True, False), ("<s>", True, False)])
    v["bl_added_strip"] = dict(pre_tokenizer=seq(split(QWEN), bytelevel()),
                               added=[("<tag>", False, False, True, True), ("ERROR", False, False, False, True),
                                      ("world", False, False, True, False), ("<|endoftext|>", True, False, True, True),
                                      ("<|im_start|>", True, False, False, True)])
    v["bl_ignore_merges"] = dict(pre_tokenizer=seq(split(QWEN), bytelevel()), ignore_merges=True)
    # single_word: (content, special, normalized, lstrip, rstrip, single_word); "xyz" and "yz" show that a
    # match dropped inside a word is not searched again for shorter tokens. None of the contents is in the
    # model's vocabulary (HF would give such a token the vocabulary's id, not the listed one).
    v["bl_single_word"] = dict(normalizer={"type": "Lowercase"}, pre_tokenizer=bytelevel(regex=True),
                               added=[("world", False, True, False, False, True), ("ERROR", False, False, False, False, True),
                                      ("<tag>", False, False, True, True, True), ("the", False, False, False, False, True),
                                      ("xyz", False, False, False, False, True), ("yz", False, False, False, False, False),
                                      ("<|endoftext|>", True, False, False, False, True)], added_not_in_vocab=True)
    # non-special added tokens inside or across special ones: HF matches the leftmost-longest of all added
    # tokens and, specials being text (mkshards' default), drops a special match without searching its text
    # again, so "<|end" inside "<|endoftext|>" stays text; an earlier-starting "xq<|" still wins.
    v["bl_added_overlap"] = dict(pre_tokenizer=bytelevel(regex=True),
                                 added=[("<|endoftext|>", True, False), ("<|end", False, False),
                                        ("oftext|>", False, False), ("<|im_start|>", True, False),
                                        ("im_st", False, False), ("xq<|", False, False),
                                        ("<|im", False, False, False, False, True)], added_not_in_vocab=True)
    return v


def sp_fixtures(docs):
    """SentencePiece BPE (byte_fallback) trained with sentencepiece, converted to
    tokenizer.json the way transformers' LlamaConverter does (merges from the
    vocabulary: every split of a piece into two pieces, by piece score), in
    several component variants. Reports how often HF's ids on the converted
    file equal sentencepiece's own encode (the Llama 2 form)."""
    import sentencepiece as spm
    import tempfile
    with tempfile.TemporaryDirectory() as td:
        with open(os.path.join(td, "train.txt"), "w") as f:
            f.write("\n".join(t.replace("\n", " ") for t in docs))
        spm.SentencePieceTrainer.train(input=os.path.join(td, "train.txt"), model_prefix=os.path.join(td, "m"),
                                       vocab_size=1000, model_type="bpe", byte_fallback=True,
                                       character_coverage=0.98, max_sentence_length=100000, minloglevel=2,
                                       normalization_rule_name="identity", remove_extra_whitespaces=False,
                                       add_dummy_prefix=True, allow_whitespace_only_pieces=True, split_digits=False)
        sp = spm.SentencePieceProcessor(model_file=os.path.join(td, "m.model"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    scores = {sp.id_to_piece(i): sp.get_score(i) for i in range(sp.get_piece_size())}
    merges = []
    for piece, score in scores.items():
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
    merges = [[a, b] for a, b, _ in sorted(merges, key=lambda x: x[2], reverse=True)]
    specials = [added(sp.id_to_piece(i), i, True, False) for i in range(3)]

    def model(byte_fallback=True, unk="<unk>", fuse_unk=True):
        return {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": fuse_unk, "byte_fallback": byte_fallback,
                "ignore_merges": False, "vocab": vocab, "merges": merges}

    meta = lambda scheme, split: {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
                                  "split": split}
    llama2_dec = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    out = {
        "sp_llama2": dict(normalizer=nseq({"type": "Prepend", "prepend": "\u2581"},
                                          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}),
                          pre_tokenizer=None, model=model(), decoder=llama2_dec),
        "sp_metaspace": dict(normalizer=None, pre_tokenizer=meta("first", False), model=model(),
                             decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
                                                                       meta("first", False)]}),
        "sp_unk_split": dict(normalizer={"type": "NFKC"}, pre_tokenizer=meta("always", True),
                             model=model(byte_fallback=False, fuse_unk=False), decoder=meta("always", True)),
        "sp_fused_unk_digits": dict(normalizer=None,
                                    pre_tokenizer=seq({"type": "Digits", "individual_digits": True},
                                                      meta("first", True)),
                                    model=model(byte_fallback=False), decoder=llama2_dec),
        "sp_no_unk": dict(normalizer=None, pre_tokenizer=meta("never", False),
                          model=model(byte_fallback=False, unk=None), decoder=llama2_dec),
    }
    res = {}
    for name, v in out.items():
        d = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": specials,
             "normalizer": v["normalizer"], "pre_tokenizer": v["pre_tokenizer"], "post_processor": None,
             "decoder": v["decoder"], "model": v["model"]}
        res[name] = json.dumps(d, ensure_ascii=False)
    hf = Tokenizer.from_str(res["sp_llama2"])
    same = sum(hf.encode(t, add_special_tokens=False).ids == sp.encode(t) for t in docs)
    print(f"sp_llama2: HF ids == sentencepiece ids on {same}/{len(docs)} documents", file=sys.stderr)
    return res


def affix_fixtures(docs):
    """BPE with continuing_subword_prefix "##" and end_of_word_suffix "</w>" (the WordPiece-like and
    original-GPT forms), trained by HF's BpeTrainer with the same options on a Whitespace
    pre-tokenizer: sp_affix (unknown characters -> [UNK], fused) and sp_affix_bytes (256 <0xNN>
    tokens appended and byte_fallback: an unknown character falls back to the bytes of prefix +
    character + suffix, as HF does; ignore_merges)."""
    tk = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["[UNK]"], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", limit_alphabet=150, show_progress=False)
    tk.train_from_iterator(docs, tr)
    base = json.loads(tk.to_str())
    base["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "</w>"}, "content": " "},
        {"type": "Replace", "pattern": {"String": "##"}, "content": ""}]}
    res = {}
    d = copy.deepcopy(base)
    d["model"]["fuse_unk"] = True
    res["sp_affix"] = json.dumps(d, ensure_ascii=False)
    d = copy.deepcopy(base)
    n = max(d["model"]["vocab"].values()) + 1
    for b in range(256):
        d["model"]["vocab"]["<0x%02X>" % b] = n + b
    d["model"]["byte_fallback"] = True
    d["model"]["ignore_merges"] = True
    d["decoder"]["decoders"].insert(0, {"type": "ByteFallback"})
    res["sp_affix_bytes"] = json.dumps(d, ensure_ascii=False)
    return res


def derived_fixtures():
    """Fixtures made from one already written (so they share its vocabulary): sp_replace_regex is
    sp_llama2 with Replace steps whose patterns are regexes, in the normalizer (a run of spaces ->
    one U+2581, digits -> '0') and in the decoder (a run of U+2581 -> one space; an empty-width
    match inserting its content)."""
    with open(os.path.join(DATA, "sp_llama2.json")) as f:
        d = json.load(f)
    d["normalizer"] = nseq({"type": "Prepend", "prepend": "\u2581"},
                           {"type": "Replace", "pattern": {"Regex": " +"}, "content": "\u2581"},
                           {"type": "Replace", "pattern": {"Regex": "[0-9]"}, "content": "0"})
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"Regex": "\u2581+"}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": "(?=ab)"}, "content": "|"},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return {"sp_replace_regex": json.dumps(d, ensure_ascii=False)}


BYTE_CHAR = None


def byte_char(b):
    """The character HF's ByteLevel maps byte b to (GPT-2's table)."""
    global BYTE_CHAR
    if BYTE_CHAR is None:
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
        cs, n = bs[:], 0
        for x in range(256):
            if x not in bs:
                bs.append(x)
                cs.append(256 + n)
                n += 1
        BYTE_CHAR = {x: chr(c) for x, c in zip(bs, cs)}
    return BYTE_CHAR[b]


def parts(m):
    return m if isinstance(m, list) else m.split(" ")


def without_bytes(d, drop):
    """d without the single-byte tokens of drop, and without every vocab entry and merge that holds
    one of those bytes (as the published files lacking bytes are: no token ever contains them)."""
    chars = {byte_char(b) for b in drop}
    v = {k: i for k, i in d["model"]["vocab"].items() if not chars & set(k)}
    d["model"]["vocab"] = {k: n for n, k in enumerate(sorted(v, key=v.get))}  # ids stay dense
    d["model"]["merges"] = [m for m in d["model"]["merges"] if all(x in d["model"]["vocab"] for x in parts(m))]
    return d


# what published byte-level files lack: C0, C1, F5-FF (DeepSeek, StarCoder, MPT, Refact), 0x03 (Falcon);
# 0x80 too, a continuation byte of most non-ASCII text, so the corpus documents exercise it everywhere
MISSING = [0x03, 0x80, 0xC0, 0xC1] + list(range(0xF5, 0x100))


def missing_fixtures(base):
    """Byte-level models that lack some single bytes, with each of HF's answers for such a byte:
    dropped (no unk_token), unk (an added special token's entry, fused runs; a plain vocab entry,
    not fused), byte_fallback (<0xNN> entries); and raw-text vocab entries outside the byte map
    (Command-R's construct: entries and added tokens such as "\n\n", "<|START_OF_TURN_TOKEN|>" spelled
    with spaces), with a merge that uses one."""
    res = {}
    pre = seq(split(QWEN), bytelevel())
    dec = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}

    def make(unk=None, fuse=False, bfb=False, extra=(), added_=(), pre_tokenizer=pre):
        d = without_bytes(copy.deepcopy(base), MISSING)
        d["pre_tokenizer"], d["decoder"] = pre_tokenizer, dec
        voc = d["model"]["vocab"]
        for e in extra:
            voc[e] = len(voc)
        d["added_tokens"] = []
        for a in added_:
            if a[0] not in voc:
                voc[a[0]] = len(voc)
            d["added_tokens"].append(added(a[0], voc[a[0]], *a[1:]))
        d["model"].update(unk_token=unk, fuse_unk=fuse, byte_fallback=bfb)
        return d
    res["bl_missing_drop"] = make()
    res["bl_missing_drop_gpt2"] = make(pre_tokenizer=bytelevel(regex=True),
                                       added_=[("<|endoftext|>", True, False)])
    res["bl_missing_unk"] = make(unk="<|endoftext|>", fuse=True, added_=[("<|endoftext|>", True, False)])
    res["bl_missing_unk_vocab"] = make(unk="<unk>", fuse=False, extra=["<unk>"])
    res["bl_missing_fallback"] = make(unk="<unk>", bfb=True, extra=["<unk>"] + ["<0x%02X>" % b for b in range(256)
                                                                              if b not in (0x83, 0x84)])
    d = make(extra=["hello world", "\n\n", "€ raw", "  "],
             added_=[("<|START_OF_TURN_TOKEN|>", True, False), ("<| USER TOKEN |>", True, False),
                     ("\t\t", False, False), ("<|endoftext|>", True, False)])
    d["model"]["vocab"]["hello worldx"] = len(d["model"]["vocab"])
    d["model"]["merges"].append(["hello world", "x"])
    res["bl_raw_entries"] = d
    return {k: json.dumps(v, ensure_ascii=False) for k, v in res.items()}


CLIP_SPLIT = "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"


def clip_fixtures(docs):
    """CLIP's byte-level BPE as transformers' CLIPConverter builds it (BPE with end_of_word_suffix
    "</w>", continuing_subword_prefix "", unk <|endoftext|>; NFC + Replace(\\s+, " ") + Lowercase;
    Split(CLIP's regex, Removed, invert) + ByteLevel), trained by HF's BpeTrainer with that suffix on
    the byte alphabet (so some bytes have no "x</w>" token: unk); clip_prefix: the same with a
    continuing_subword_prefix "##"."""
    from tokenizers import normalizers, Regex
    res = {}
    for name, prefix in [("bl_clip", ""), ("bl_clip_prefix", "##")]:
        tk = Tokenizer(models.BPE(unk_token="<|endoftext|>", continuing_subword_prefix=prefix,
                                  end_of_word_suffix="</w>"))
        tk.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex("\\s+"), " "),
                                              normalizers.Lowercase()])
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(CLIP_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False)])
        tr = trainers.BpeTrainer(vocab_size=900, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), end_of_word_suffix="</w>",
                                 continuing_subword_prefix=prefix, show_progress=False)
        tk.train_from_iterator(docs, tr)
        d = json.loads(tk.to_str())
        d["model"]["continuing_subword_prefix"] = prefix
        d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        d["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 1],
                               "cls": ["<|startoftext|>", 0], "trim_offsets": False, "add_prefix_space": False}
        res[name] = json.dumps(d, ensure_ascii=False)
    return res


def audit_fixtures(base):
    """Constructs of published files that an audit of real files against HF found unsupported
    (docs/tokenizer.md, "Real files checked"): bl_after_bytelevel, Falcon's pre-tokenizer (Punctuation,
    ByteLevel, then Digits and a Split of three digits, which split ByteLevel's characters: '²' of
    byte 0xB2 is a digit to them); bl_after_bytelevel_split, a letter Split after a ByteLevel without
    regex (its 'Ġ' for a space is a letter); bl_empty_entry, a vocab entry "" (Whisper's
    tokenizer.json: id 50256), and sp_empty_entry the same in a SentencePiece-style BPE;
    bl_untyped and uni_untyped, models without "type" (tokenizers < 0.9
    wrote none: roberta-base's and t5-small's files), which HF reads by the vocab's shape."""
    res = {}
    dec = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    d = copy.deepcopy(base)
    d["pre_tokenizer"] = seq({"type": "Punctuation", "behavior": "Contiguous"}, bytelevel(regex=True),
                             {"type": "Digits", "individual_digits": False}, split("[0-9][0-9][0-9]"))
    d["decoder"] = dec
    res["bl_after_bytelevel"] = d
    d = copy.deepcopy(base)
    d["pre_tokenizer"] = seq(bytelevel(prefix=True), split("\\p{L}+|\\p{N}+"), {"type": "WhitespaceSplit"})
    d["decoder"] = dec
    res["bl_after_bytelevel_split"] = d
    d = copy.deepcopy(base)
    d["model"]["vocab"][""] = len(d["model"]["vocab"])
    d["pre_tokenizer"], d["decoder"] = bytelevel(regex=True), dec
    res["bl_empty_entry"] = d
    d = copy.deepcopy(base)
    del d["model"]["type"]
    d["pre_tokenizer"], d["decoder"] = bytelevel(regex=True), dec
    res["bl_untyped"] = d
    d = copy.deepcopy(base)
    d["pre_tokenizer"], d["decoder"] = seq({"type": "Punctuation", "behavior": "Removed"}, bytelevel()), dec
    res["bl_punct_unicode"] = d  # HF's punctuation table is older than utf8proc's (hf_ucd.h)
    with open(os.path.join(HERE, "..", "data", "tk_hf_uni", "hf_ws_nfkc.json")) as f:
        d = json.load(f)
    del d["model"]["type"]
    res["uni_untyped"] = d
    # sp_empty_entry: a vocab entry "" in a SentencePiece-style BPE (no ByteLevel), which HF loads too
    with open(os.path.join(DATA, "sp_metaspace.json")) as f:
        d = json.load(f)
    d["model"]["vocab"][""] = 1 + max(list(d["model"]["vocab"].values()) + [a["id"] for a in d["added_tokens"]])
    res["sp_empty_entry"] = d
    return {k: json.dumps(v, ensure_ascii=False) for k, v in res.items()}


def normalizer_fixtures():
    """One tokenizer.json per HF normalizer whose Unicode version is not utf8proc's (hf_ucd.h): no
    pre-tokenizer, a BPE of the 256 <0xNN> byte tokens alone with byte_fallback, so the ids spell out the
    normalized text byte by byte. make_tk_hf_refs.py gives them the code points where the versions part."""
    vocab = {"<unk>": 0}
    for b in range(256):
        vocab["<0x%02X>" % b] = b + 1
    res = {}
    for name, norm in [("nm_nfc", {"type": "NFC"}), ("nm_nfd", {"type": "NFD"}), ("nm_nfkc", {"type": "NFKC"}),
                       ("nm_nfkd", {"type": "NFKD"}), ("nm_lower", {"type": "Lowercase"}),
                       ("nm_strip_accents", nseq({"type": "NFD"}, {"type": "StripAccents"}))]:
        d = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": norm,
             "pre_tokenizer": None, "post_processor": None,
             "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
             "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                       "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                       "vocab": vocab, "merges": []}}
        res[name] = json.dumps(d, ensure_ascii=False)
    return res


def write_fixture(name, s):
    """DATA/NAME.json = s, once HF accepts it (skipped when --only names other fixtures)."""
    if ONLY and name not in ONLY:
        return
    Tokenizer.from_str(s)
    with open(os.path.join(DATA, name + ".json"), "w") as f:
        f.write(s)
    print(name, len(s), file=sys.stderr)


def main():
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(texts(), tr)
    base = json.loads(tk.to_str())
    os.makedirs(DATA, exist_ok=True)
    for name, var in variants().items():
        if ONLY and name not in ONLY:
            continue
        d = copy.deepcopy(base)
        d["normalizer"] = var.get("normalizer")
        d["pre_tokenizer"] = var["pre_tokenizer"]
        d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        if var.get("ignore_merges"):
            d["model"]["ignore_merges"] = True
        n = len(d["model"]["vocab"])
        d["added_tokens"] = [added(t[0], n + i, *t[1:]) for i, t in enumerate(var.get("added", []))]
        if var.get("added_not_in_vocab"):
            assert not [t[0] for t in var["added"] if t[0] in d["model"]["vocab"]], name
        write_fixture(name, json.dumps(d, ensure_ascii=False))
    for name, s in affix_fixtures(texts()).items():
        write_fixture(name, s)
    derived = ("sp_affix", "sp_replace_regex")
    for name, s in ({} if ONLY and not any(o.startswith("sp_") and not o.startswith(derived) for o in ONLY)
                    else sp_fixtures(texts())).items():
        write_fixture(name, s)
    for name, s in derived_fixtures().items():  # after sp_llama2 is written
        write_fixture(name, s)
    for name, s in missing_fixtures(base).items():
        write_fixture(name, s)
    for name, s in clip_fixtures(texts()).items():
        write_fixture(name, s)
    for name, s in audit_fixtures(base).items():
        write_fixture(name, s)
    for name, s in normalizer_fixtures().items():
        write_fixture(name, s)


if __name__ == "__main__":
    main()
