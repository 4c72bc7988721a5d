#!/usr/bin/env python3
"""Seed corpora for the tokenizer-loader fuzz targets (stdlib only).

    python3 tests/data/fuzz/make_tokenizer_seeds.py   # (re)writes its seeds in the three folders

tests/data/fuzz/tiktoken, tokenizer_json, encoder_json: small synthetic
vocabularies (the real ones are megabytes; fuzzing wants inputs of a few KiB)
plus edge cases: ids 2^32-1, -1, 10^9, 2^31, floats, duplicates, gaps, bad
base64, merges naming unknown tokens. Layout of one input (fuzz_tk_common.h):
flags byte (bits 0-1 pattern, bit 2 no second file), u16 little-endian length
of the first file, first file, second file.
"""
import base64
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def pack(first, second=b"", pat=0, no_second=False):
    flags = (pat & 3) | (4 if no_second else 0)
    return bytes([flags]) + struct.pack("<H", len(first)) + first + second


def byte_char(b):
    """GPT-2's bytes_to_unicode for one byte."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in printable:
        return chr(b)
    return chr(256 + [x for x in range(256) if x not in printable].index(b))


def bl(bs):
    return "".join(byte_char(b) for b in bs)


MERGES = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"a", b"a"), (b"aa", b"aa")]


def rank_file(extra=()):
    lines = [b"%s %d" % (base64.b64encode(bytes([b])), b) for b in range(256)]
    for i, (a, b) in enumerate(MERGES):
        lines.append(b"%s %d" % (base64.b64encode(a + b), 256 + i))
    lines += list(extra)
    return b"\n".join(lines) + b"\n"


def meta(specials=None, pattern="gpt2", raw=None):
    if raw is not None:
        return raw.encode()
    return json.dumps({"pattern": pattern, "special_tokens": specials or {}}).encode()


def vocab():
    v = {bl([b]): b for b in range(256)}
    for i, (a, b) in enumerate(MERGES):
        v[bl(a + b)] = 256 + i
    return v


def merges_str():
    return [bl(a) + " " + bl(b) for a, b in MERGES]


def hf(vocab_extra=None, merges=None, added=None, pre=None):
    v = vocab()
    v.update(vocab_extra or {})
    doc = {
        "added_tokens": added if added is not None else [{"id": 262, "content": "<|endoftext|>", "special": True}],
        "pre_tokenizer": pre or {"type": "ByteLevel", "use_regex": True},
        "model": {"type": "BPE", "vocab": v, "merges": merges if merges is not None else merges_str()},
    }
    return json.dumps(doc, ensure_ascii=False).encode()


def encoder(extra=None, raw_tail=""):
    v = vocab()
    v["<|endoftext|>"] = 262
    v.update(extra or {})
    s = json.dumps(v, ensure_ascii=False)
    if raw_tail:
        s = s[:-1] + raw_tail + "}"
    return s.encode()


def bpe(lines=None):
    return ("#version: 0.2\n" + "\n".join(lines if lines is not None else merges_str()) + "\n").encode()


BAD_IDS = ["4294967295", "-1", "1000000000", "2147483648", "16777216", "1e9", "262.0", '"262"', "true"]


def unigram(vocab=None, unk_id=0, byte_fallback=False, normalizer=None, pre=None, decoder=None, raw_vocab=None,
            added=None):
    if vocab is None:
        vocab = [["<unk>", 0.0], ["\u2581", -2.0], ["\u2581the", -3.5], ["the", -4.25], ["h", -5.0], ["e", -5.0],
                 ["t", -5.0], ["a", -6.0], ["ab", -4.0], ["abc", -7.5], ["b", -6.0], ["c", -6.0]]
    model = {"type": "Unigram", "unk_id": unk_id, "vocab": vocab, "byte_fallback": byte_fallback}
    doc = {"added_tokens": added if added is not None else [{"id": 0, "content": "<unk>", "special": True}],
           "normalizer": normalizer, "pre_tokenizer": pre or {"type": "Metaspace", "replacement": "\u2581",
                                                               "prepend_scheme": "always", "split": True},
           "decoder": decoder, "model": model}
    s = json.dumps(doc, ensure_ascii=False)
    if raw_vocab is not None:
        s = s.replace(json.dumps(vocab, ensure_ascii=False), raw_vocab)
    return s.encode()


def wordpiece(model=None, **over):
    """A small BERT-like tokenizer.json: BertNormalizer, BertPreTokenizer, WordPiece (or another model), the
    WordPiece decoder, TemplateProcessing with [CLS] / [SEP]."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "hello", "world", "##s", "##ing", "##ed", ".", ",",
            "\u4e2d", "e\u0301"] + letters + ["##" + c for c in letters]
    vocab = {t: i for i, t in enumerate(toks)}
    d = {"version": "1.0", "truncation": None, "padding": None,
         "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True} for i, t in enumerate(toks[:5])],
         "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                        "strip_accents": None, "lowercase": True},
         "pre_tokenizer": {"type": "BertPreTokenizer"},
         "post_processor": {"type": "TemplateProcessing",
                            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                       {"Sequence": {"id": "A", "type_id": 0}},
                                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                            "pair": [], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                           "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
         "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
         "model": model or {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                            "max_input_chars_per_word": 100, "vocab": vocab}}
    d.update(over)
    return json.dumps(d).encode()


def wordpiece_seeds():
    """WordPiece / WordLevel models (hf_wordpiece.c), BertNormalizer, BertPreTokenizer, the WordPiece decoder."""
    w = {}
    base = json.loads(wordpiece())["model"]
    vocab = base["vocab"]
    w["ok"] = wordpiece()
    untyped = dict(base)
    del untyped["type"]
    w["untyped"] = wordpiece(untyped)
    w["max0"] = wordpiece(dict(base, max_input_chars_per_word=0))
    w["max_huge"] = wordpiece(dict(base, max_input_chars_per_word=2 ** 62))
    w["max_negative"] = wordpiece(dict(base, max_input_chars_per_word=-1))
    w["no_unk"] = wordpiece(dict(base, unk_token="[NOPE]"))
    w["empty_prefix"] = wordpiece(dict(base, continuing_subword_prefix=""))
    w["long_prefix"] = wordpiece(dict(base, continuing_subword_prefix="#" * 70))
    w["cased"] = wordpiece(normalizer={"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
                                       "strip_accents": True, "lowercase": False})
    w["wordlevel"] = wordpiece({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
                               pre_tokenizer={"type": "Whitespace"}, decoder=None)
    w["wordlevel_untyped"] = wordpiece({"vocab": vocab, "unk_token": "[UNK]"})
    w["wordlevel_no_unk"] = wordpiece({"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"})
    w["empty_vocab"] = wordpiece(dict(base, vocab={}))
    return w


def unigram_seeds():
    u = {}
    u["ok"] = unigram()
    u["byte_fallback"] = unigram(vocab=[["<unk>", 0.0], ["a", -1.0]] + [["<0x%02X>" % b, -9.0] for b in range(256)],
                                 byte_fallback=True,
                                 decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]})
    u["no_unk"] = unigram(unk_id=None, added=[])
    u["dup_piece"] = unigram(vocab=[["<unk>", 0.0], ["a", -1.0], ["b", -1.0], ["a", -0.5], ["ab", -3.0]])
    u["unk_out_of_range"] = unigram(unk_id=12)
    u["unk_negative"] = unigram(unk_id=-1)
    u["empty_vocab"] = unigram(vocab=[], unk_id=None, added=[])
    u["nul_piece"] = unigram(raw_vocab='[["<unk>", 0.0], ["a\\u0000", -1.0]]')
    u["empty_piece"] = unigram(raw_vocab='[["<unk>", 0.0], ["", -1.0], ["a", -2.0]]')
    for i, num in enumerate(["1e999", "-1e400", "1e-400", "12345678901234567890123.5", "-0", "0.1e+5",
                             "123456789012345678901234567890", "1.", ".5", "\"x\"", "null", "-9.999999999999999e307"]):
        u["score_%d" % i] = unigram(raw_vocab='[["<unk>", 0.0], ["a", %s], ["b", -1.5]]' % num)
    u["not_pairs"] = unigram(raw_vocab='[["<unk>", 0.0], ["a"], ["b", -1.5, 3]]')
    u["object_vocab"] = unigram(raw_vocab='{"a": 0}')
    u["nfkc_strip_accents_first"] = unigram(
        normalizer={"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": True, "strip_right": True},
                                                        {"type": "NFKD"}, {"type": "StripAccents"},
                                                        {"type": "Lowercase"}]},
        pre={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False})
    u["whitespace_split"] = unigram(pre={"type": "WhitespaceSplit"}, normalizer={"type": "NFKC"})
    u["bytelevel"] = unigram(pre={"type": "ByteLevel", "add_prefix_space": False, "use_regex": True})
    return u


def seeds():
    t = {}
    t["ok"] = pack(rank_file(), meta({"<|endoftext|>": 262}))
    t["ok_cl100k"] = pack(rank_file(), meta({"<|endoftext|>": 300}, "cl100k"))
    t["ok_o200k_nometa"] = pack(rank_file(), pat=3, no_second=True)
    t["no_pattern"] = pack(rank_file(), no_second=True)
    for i, bad in enumerate(BAD_IDS):
        t["meta_id_%d" % i] = pack(rank_file(), meta(raw='{"pattern":"gpt2","special_tokens":{"<|x|>":%s}}' % bad))
    t["rank_big"] = pack(rank_file([b"aGk= 4294967295"]), meta())
    t["rank_neg"] = pack(rank_file([b"aGk= -1"]), meta())
    t["rank_dup"] = pack(rank_file([b"aGk= 5"]), meta())
    t["bytes_dup"] = pack(rank_file([b"QQ== 262"]), meta())
    t["bad_b64"] = pack(rank_file([b"a!k= 262"]), meta())
    t["empty_tok"] = pack(rank_file([b"= 262"]), meta())
    t["crlf"] = pack(rank_file().replace(b"\n", b"\r\n"), meta())
    t["missing_byte"] = pack(rank_file()[12:], meta())
    t["meta_bad_pattern"] = pack(rank_file(), meta(pattern="(?s).*"))
    t["meta_dup_id"] = pack(rank_file(), meta({"<|a|>": 262, "<|b|>": 262}))
    t["meta_gap"] = pack(rank_file(), meta({"<|a|>": 100000}))
    t["meta_garbage"] = pack(rank_file(), b"[[[[{")
    t["empty"] = pack(b"", b"")

    h = {}
    h["ok"] = pack(hf())
    h["ok_array_merges"] = pack(hf(merges=[[bl(a), bl(b)] for a, b in MERGES]))
    h["ok_split_cl100k"] = pack(hf(pre={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
        {"type": "ByteLevel", "use_regex": False}]}))
    h["ok_shuffled_ids"] = pack(hf(vocab_extra={bl(b"he"): 300, bl(b"ll"): 301}, added=[]))
    for i, bad in enumerate(BAD_IDS):
        h["added_id_%d" % i] = pack(hf(added=[]).replace(b'"added_tokens": []',
                                                         b'"added_tokens": [{"id": %s, "content": "<|x|>"}]' % bad.encode()))
        h["vocab_id_%d" % i] = pack(hf().replace(b'"vocab": {', b'"vocab": {"zz": ' + bad.encode() + b", ", 1))
    h["vocab_dup_id"] = pack(hf(vocab_extra={"xyz": 256}))
    h["merge_unknown_part"] = pack(hf(merges=merges_str() + ["he zz"]))
    h["merge_unknown_result"] = pack(hf(merges=merges_str() + ["e h"]))
    h["model_wordpiece"] = pack(b'{"model":{"type":"WordPiece","vocab":{}}}')
    h["deep"] = pack(b'{"model":' + b"[" * 3000)
    h["nul_string"] = pack(b'{"model":{"type":"BPE","vocab":{"a\\u0000":1},"merges":[]}}')
    h["objects"] = pack(b"[" + b"{}," * 2000 + b"{}]")
    # Unigram models (hf_unigram.c, the serde_json score reader in hf_json.c)
    for k, v in unigram_seeds().items():
        h["uni_" + k] = pack(v)
    for k, v in wordpiece_seeds().items():
        h["wp_" + k] = pack(v)

    e = {}
    e["ok"] = pack(encoder(), bpe())
    e["ok_nobpe_version"] = pack(encoder(), bpe()[len("#version: 0.2\n"):])
    for i, bad in enumerate(BAD_IDS):
        e["id_%d" % i] = pack(encoder(raw_tail=', "<|x|>": %s' % bad), bpe())
    e["dup_id"] = pack(encoder({"<|a|>": 262}), bpe())
    e["dup_key"] = pack(encoder(raw_tail=', "he": 263'), bpe())
    e["gap"] = pack(encoder({"<|a|>": 5000000}), bpe())
    e["merge_unknown"] = pack(encoder(), bpe(merges_str() + ["q zz"]))
    e["merge_result_unknown"] = pack(encoder(), bpe(merges_str() + ["e h"]))
    e["merge_three"] = pack(encoder(), bpe(["h e x"]))
    e["bpe_nul"] = pack(encoder(), b"h e\n\x00x y\n")
    e["empty_key"] = pack(encoder({"": 263}), bpe())
    return {"tiktoken": t, "tokenizer_json": h, "encoder_json": e}


def main():
    for name, items in seeds().items():
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)  # other seeds there (hf_*: copies of test fixtures) stay
        for k, v in sorted(items.items()):
            assert len(v) < 16384, (name, k, len(v))
            with open(os.path.join(d, k), "wb") as f:
                f.write(v)
        print("%s: %d seeds" % (d, len(items)))


if __name__ == "__main__":
    main()
