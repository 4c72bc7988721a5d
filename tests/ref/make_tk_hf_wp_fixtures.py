#!/usr/bin/env python3
"""Build the WordPiece / WordLevel tokenizer.json fixtures of tests/data/tk_hf_wp and their reference ids with HF
`tokenizers` 0.23.3 (test_tk_hf_wp = tests/test_tk_hf.c on this directory).

    python3 tests/ref/make_tk_hf_wp_fixtures.py REAL_DIR [SHARED_DIR]
    (needs tokenizers==0.23.3, zstandard)

REAL_DIR holds three published tokenizer.json files (docs/tokenizer.md, "WordPiece and WordLevel", says where each
came from): bert-base-uncased.json, bert-base-chinese.json, all-MiniLM-L6-v2.json. Each fixture derived from one
keeps the file's whole pipeline (BertNormalizer, BertPreTokenizer, WordPiece decoder, TemplateProcessing, added
tokens; bert-base-uncased's and bert-base-chinese's model without "type", as published) with a smaller vocabulary:
the entries HF uses on the edge cases and on every 10th corpus document (every 30th for wp_bert_uncased; none for
wp_minilm, wp_options and wp_no_unk), plus 1000-2000 others drawn with a fixed seed, renumbered in the file's order (added tokens
and the post_processor follow). Fixtures:

  wp_bert_uncased   bert-base-uncased: lowercase, strip_accents null (= lowercase), CJK spacing; untagged model
  wp_bert_chinese   bert-base-chinese: cased (no lowercase, so no accent stripping), CJK spacing; untagged model
  wp_minilm         all-MiniLM-L6-v2: typed model; its truncation (256) and padding stay in the file (encode
                    never truncates: the refs are made with both off, as mkshards encodes)
  wp_options        bert-base-uncased's vocabulary with other options: prefix "@@" (entries renamed), at most 8
                    characters a word, clean_text and handle_chinese_chars off, strip_accents true with lowercase
                    false, BertPreTokenizer then Digits, decoder prefix "@@" without cleanup
  wp_no_unk         unk_token "[NOPE]", not in the vocabulary: HF fails a text with an unknown word ("err")
  wl_trained        WordLevel trained by HF's WordLevelTrainer (Lowercase, Whitespace pre-tokenizer, no decoder)
  wl_untyped        the same model without "type" (HF's untagged read: vocab + unk_token, no WordPiece fields),
                    BertNormalizer + BertPreTokenizer, WordPiece decoder
  wl_no_unk         WordLevel whose unk_token is not in the vocabulary ("err" where a word is unknown)

refs.jsonl.zst rows (the format of make_tk_hf_refs.py, which test_tk_hf.c reads): edge cases in both modes with
"ids" (or "err") and, in plain mode, "dec" = HF's decode(ids, skip_special_tokens=False); every one of the first
300 documents of each ../shared/corpus category by sha of its ids (or "err").
"""
import copy
import json
import os
import random
import sys

import zstandard
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_tk_hf_refs as hfrefs  # noqa: E402

DATA = os.path.join(HERE, "..", "data", "tk_hf_wp")
ARGS = sys.argv[1:]
REAL = ARGS[0] if ARGS else os.path.join(HERE, "..", "..", "..", "real-tokenizers")
SHARED = ARGS[1] if len(ARGS) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
hfrefs.SHARED = SHARED

EDGE_EXTRA = [
    "[CLS] hello [SEP]", "[cls] [UNK][MASK]x[PAD]", "[CLS]", "x[SEP]y", "[UNK]", "a" * 7, "a" * 8, "a" * 9,
    "a" * 99, "a" * 100, "a" * 101, "é" * 100, "é" * 101, "中" * 120, "x" + "中" * 3 + "y",
    "\x00\x01\x02 a\x7fb\x1fc\x0bd\x0ce\x85f", "\ufffd\ufffd a\ufffdb", "\u200b\u200c\u200d\u2060\ufeff x",
    "\ue000\uf8ff \U000f0000 private", "\u0890\u08e2\U000110cd\U00013430 new Cf", "e\u0301 \u1734 \u08d4 \u0f73",
    "Ａ ｂ ① ﬁ ℌ", "ÀÉÎÕÜ àéîõü Ççñ ÅØ Æ œ", "ǅ İ ẞ Σ", "can't do not he's I'm you've we're", "a . b ? c ! d , e ' f",
    "supercalifragilisticexpialidocious antidisestablishmentarianism", "unbelievableness " * 20,
    "\U00020000\U0002a6df\U0002a700\U0002b740\U0002b820 \U0002b91f\U0002b920\U0002ceaf",
    "\u3400\u4dbf\u4e00\u9fff\uf900\ufaff\U0002f800\U0002fa1f", "😀 🤗 🧑‍💻", "日本語 ひらがな カタカナ 한국어", "x\u0301y",
    "\u0301start", " \t\n\r ", "\u00ad soft\u00adhyphen", "Hello!!! World??? ...", "3.14159 1,000,000 50% $5",
    "@user #tag http://x.y/z?a=b&c=d", "l" + "o" * 150 + "ng", "a-b_c/d\\e|f~g`h^i", "##ing ## #", "@@ing @@x",
    "xyzzyq qqqq zzzz", "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def texts_for_vocab(docs, every):
    return [t for (_, i, t) in docs if every and i % every == 0] + hfrefs.edge_cases() + EDGE_EXTRA


def pruned(path, docs, seed, every, others):
    """The published file with the entries HF uses on texts_for_vocab plus others more, renumbered in order."""
    d = json.load(open(path, encoding="utf-8"))
    tk = Tokenizer.from_file(path)
    tk.no_truncation()
    tk.no_padding()
    used = set()
    for e in tk.encode_batch(texts_for_vocab(docs, every), add_special_tokens=False):
        used.update(e.ids)
    vocab = d["model"]["vocab"]
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    rest = [i for t, i in by_id if i not in used and t not in SPECIALS]
    used.update(random.Random(seed).sample(rest, others))
    keep = [(t, i) for t, i in by_id if i in used or t in SPECIALS]
    new_id = {i: k for k, (t, i) in enumerate(keep)}
    d["model"]["vocab"] = {t: new_id[i] for t, i in keep}
    for a in d["added_tokens"]:
        a["id"] = new_id[a["id"]]
    for st in d["post_processor"]["special_tokens"].values():
        st["ids"] = [new_id[i] for i in st["ids"]]
    return d


def wordlevel(docs):
    tk = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    train = [t for (c, i, t) in docs if i % 3 == 1 and c in ("web", "en-books")]
    tk.train_from_iterator(train, trainers.WordLevelTrainer(vocab_size=3000, special_tokens=["[UNK]", "[PAD]"]))
    return json.loads(tk.to_str())


def make(docs):
    fx = {}
    fx["wp_bert_uncased"] = pruned(os.path.join(REAL, "bert-base-uncased.json"), docs, 1, 30, 1000)
    fx["wp_bert_chinese"] = pruned(os.path.join(REAL, "bert-base-chinese.json"), docs, 2, 10, 1500)
    fx["wp_minilm"] = pruned(os.path.join(REAL, "all-MiniLM-L6-v2.json"), docs, 3, 0, 1000)
    small = pruned(os.path.join(REAL, "bert-base-uncased.json"), docs, 4, 0, 2000)  # the edge cases' entries

    o = copy.deepcopy(small)
    o["model"]["vocab"] = {("@@" + t[2:] if t.startswith("##") else t): i for t, i in o["model"]["vocab"].items()}
    o["model"]["continuing_subword_prefix"] = "@@"
    o["model"]["max_input_chars_per_word"] = 8
    o["model"]["type"] = "WordPiece"
    o["normalizer"] = {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
                       "strip_accents": True, "lowercase": False}
    o["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "BertPreTokenizer"}, {"type": "Digits", "individual_digits": True}]}
    o["decoder"] = {"type": "WordPiece", "prefix": "@@", "cleanup": False}
    fx["wp_options"] = o

    n = copy.deepcopy(small)
    n["model"]["unk_token"] = "[NOPE]"
    fx["wp_no_unk"] = n

    wl = wordlevel(docs)
    fx["wl_trained"] = wl
    u = copy.deepcopy(wl)
    del u["model"]["type"]
    u["normalizer"] = copy.deepcopy(fx["wp_bert_uncased"]["normalizer"])
    u["pre_tokenizer"] = {"type": "BertPreTokenizer"}
    u["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    fx["wl_untyped"] = u
    z = copy.deepcopy(wl)
    z["model"]["unk_token"] = "<unk>"
    fx["wl_no_unk"] = z
    for name, d in fx.items():
        Tokenizer.from_str(json.dumps(d))  # HF reads it back
    return fx


def main():
    os.makedirs(DATA, exist_ok=True)
    docs = list(hfrefs.corpus())
    fx = make(docs)
    lines = []
    for name, d in sorted(fx.items()):
        path = os.path.join(DATA, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False, separators=(",", ":"))
        tk = Tokenizer.from_file(path)
        tk.no_truncation()
        tk.no_padding()
        for mode in ["plain", "special"]:
            tk.encode_special_tokens = mode == "plain"
            for text in hfrefs.edge_cases() + EDGE_EXTRA:
                rec = {"tok": name, "mode": mode, "text": text}
                try:
                    ids = tk.encode(text, add_special_tokens=False).ids
                    rec["ids"] = ids
                    if mode == "plain":
                        rec["dec"] = tk.decode(ids, skip_special_tokens=False)
                except Exception:  # HF fails the text (MissingUnkToken)
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
