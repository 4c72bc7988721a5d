#!/usr/bin/env python3
"""Build the tokenizer.json fixtures of tests/data/tk_hf with HF `tokenizers`.

    python3 tests/ref/make_tk_hf_fixtures.py [SHARED_DIR]   # then make_tk_hf_refs.py

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
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")


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


def added(content, id_, special, normalized):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
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
    v["bl_ignore_merges"] = dict(pre_tokenizer=seq(split(QWEN), bytelevel()), ignore_merges=True)
    return v


def main():
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(texts(), tr)
    base = json.loads(tk.to_str())
    os.makedirs(DATA, exist_ok=True)
    for name, var in variants().items():
        d = copy.deepcopy(base)
        d["normalizer"] = var.get("normalizer")
        d["pre_tokenizer"] = var["pre_tokenizer"]
        d["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        if var.get("ignore_merges"):
            d["model"]["ignore_merges"] = True
        n = len(d["model"]["vocab"])
        d["added_tokens"] = [added(c, n + i, sp, nm) for i, (c, sp, nm) in enumerate(var.get("added", []))]
        s = json.dumps(d, ensure_ascii=False)
        Tokenizer.from_str(s)  # HF accepts it
        with open(os.path.join(DATA, name + ".json"), "w") as f:
            f.write(s)
        print(name, len(s), file=sys.stderr)


if __name__ == "__main__":
    main()
