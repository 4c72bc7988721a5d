#!/usr/bin/env python3
"""Reference ids for HF tokenizer.json parity (tests/test_tk_hf.c).

Made with HF `tokenizers` itself (pip install tokenizers zstandard):

    python3 tests/ref/make_tk_hf_refs.py [SHARED_DIR] [--only=NAME,...]   # default ../shared

Writes tests/data/tk_hf/refs.jsonl.zst, one line per (tokenizer, document):
  {"tok": NAME, "cat": CATEGORY, "doc": N, "n": COUNT, "sha": SHA}
for the first 300 documents of each ../shared/corpus category (all books),
SHA = first 16 hex digits of sha256 over the ids as little-endian uint32; and
  {"tok": NAME, "mode": "plain"|"special", "text": T, "ids": [...]}
for every edge case (full ids), in both modes:
  plain   = encode_special_tokens = True, add_special_tokens=False (mkshards default)
  special = HF's default recognition of added tokens (--allow-special all)
and, for the SentencePiece-style fixtures (sp_*), "dec": HF's decode of the ids.

Tokenizers: the two real ones of ../shared/vocab/hf (llama3, qwen2) and the
fixtures under tests/data/tk_hf/*.json (built by make_tk_hf_fixtures.py).
"""
import glob
import hashlib
import json
import os
import struct
import sys

import zstandard
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tk_hf")
ARGS = [a for a in sys.argv[1:] if not a.startswith("--only=")]
# --only=NAME,...: recompute the lines of these tokenizers, keep the others' lines as they are
ONLY = [n for a in sys.argv[1:] if a.startswith("--only=") for n in a[7:].split(",")]
SHARED = ARGS[0] if ARGS else os.path.join(HERE, "..", "..", "..", "shared")
CATS = ["en-books", "multi", "code", "web"]
PER_CAT = 300


def corpus():
    for cat in CATS:
        path = os.path.join(SHARED, "corpus", cat + ".jsonl.zst")
        with open(path, "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        for i, line in enumerate(data.decode("utf-8").splitlines()[:PER_CAT]):
            yield cat, i, json.loads(line)["text"]


def edge_cases():
    cases = [
        "", " ", "  ", "\n", "\n\n\n", "\r\n", " \n ", "\t\t x", "a", "Hello world", " Hello world",
        "Hello  world   ", "I'm can't won't they're we've he'll she'd it's", "I'M CAN'T THEY'RE WE'VE HE'LL SHE'D",
        "don't ſ 'S 'ſ", "12345678901234567890", "1 22 333 4444 55555", "٣٤٥ ١٢ ⅷ ½ ²³",
        "naïve café résumé", "nai\u0308ve cafe\u0301 re\u0301sume\u0301", "\u212b \u2126 \uac00\u11a8 \u1100\u1161",
        "ﬁ ﬂ ﬃ ｆｕｌｌ ①②", "İstanbul ΣΑΣ ß ẞ", "Ǆ ǅ ǆ", "日本語のテキスト、句読点。", "中文文本，标点符号。",
        "한국어 텍스트입니다", "Русский текст, пунктуация!", "العربية النص", "עברית טקסט", "हिन्दी पाठ",
        "emoji 😀👍🏽👨‍👩‍👧 🇫🇷", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛 𐍈", "\u00a0\u2000\u3000x\u0085y\u2028z",
        "tabs\tand\u000bvertical\u000cfeed", "    def f(x):\n        return x**2\n\n\n", "a\u0301\u0302\u0303b",
        "<|endoftext|>", "<|begin_of_text|>Hi<|end_of_text|>", "x<|im_start|>user\nhi<|im_end|>y",
        "<|endoftext|><|endoftext|>", "<|endoftext", "!!!???...,,,;;;", "$$$ ### @@@ %%%", "a\u200db\u200cc",
        "ab" * 300, " " * 100 + "x", "\n" * 50 + "x", "x" + " " * 50, "1" * 100, "ä" * 200,
        "Mixed123Numbers456and789Letters", "https://example.com/path?q=1&r=2#frag", "user@example.com",
        "C:\\Users\\name\\file.txt", "{\"key\": [1, 2, 3]}", "   leading", "trailing   ", "\u2581 already meta",
        "<s> </s> <unk> [CLS]", "▁▁▁", "\ufeffBOM", "a\r\nb\rc\n", "ǅungla", "ΌΣΟΣ όσος",
        "Hello <tag>  world ERROR  \n x", "a  <|endoftext|>  b", " world world  <|im_start|>  x",
        "\u3000<tag>\u3000ERROR\u2028y", "<tag><tag>  <tag>", "ERROR", "   world",
    ]
    return cases


# edge cases of one fixture only (its component needs them; the common list is for every tokenizer)
EXTRA = {
    "bl_single_word": [
        "the theme other the. (the) the_x the1 x_the", "axyz yz xyz xyz. yzxyz", "ERROR ERRORS xERROR (ERROR) _ERROR ERROR_",
        "World world worlds WORLD-world", "<tag>x <tag> x<tag> a <tag> b", "é<tag> ⓐERROR ERROR\u200d ERROR\u0301",
        "١ERROR٢ ٣ ERROR ٤", "ⅫERROR ERROR½ ²ERROR", "xyz\u00a0xyz\u3000the", "<|endoftext|>the<|endoftext|> the",
        # letters and marks of Unicode 15.1/16.0 (word characters to HF's Rust regex, unassigned to utf8proc 2.8)
        "\u0897ERROR ERROR\u1c89 \ua7cbthe the\U000105c0 \U0002ebf0xyz xyz\U0001e5d0 ERROR\u0897 ERROR",
    ],
    "bl_added_overlap": [
        "a<|endoftext|>b", "x<|end<|endoftext|>oftext|>", "<|im_start|>user\nhi", "xq<|im_start|>y", "<|im<|im_start|>",
        "oftext|> <|end <|endoftext <|endoftext|>", "<|im_st <|im_start <|im x<|im <|im_startx", "xq<|endoftext|>",
        "<|endoftext|><|im_start|><|endoftext|>", "<|end|> <|endo",
    ],
}


# edge cases of the fixtures that lack some bytes (0x03 and 0x80 are the ones valid UTF-8 can hold)
MISSING_EXTRA = ["a\x03b", "t\x03he \x03\x03x x\x03\x03", "\x03", "\x01\x02\x03\x04 ctl\x03\x7f",
                 "À€\u0080 — “quoted” ‘x’", "\x03<|endoftext|>\x03", "ﬁ\x03ﬂ", "hello world\n\nhello worldx",
                 "\t\t<|START_OF_TURN_TOKEN|><| USER TOKEN |>€ raw  x"]
for _n in ["bl_missing_drop", "bl_missing_drop_gpt2", "bl_missing_unk", "bl_missing_unk_vocab", "bl_missing_fallback",
           "bl_raw_entries", "bl_clip", "bl_clip_prefix"]:
    EXTRA[_n] = MISSING_EXTRA
# steps after ByteLevel split its characters: Latin-1 digits and signs are bytes 0xB2 0xB3 0xB9 0xBC-0xBE
# behind a 0xC2 (its 'Â'), a space is 'Ġ'
AFTER_BL = ["world²³ x¹ ½¾ 12345678 1²3", "٣٤٥6789 ²²² 10³m ¼x", "a...b!!! ¿¡ «x» §1 ·2", " hello  world\u00a0x \t9",
            "\x7f\x80 1\u00ad2 ÿ3", "price: 1234567.89€ — 2½"]
for _n in ["bl_after_bytelevel", "bl_after_bytelevel_split"]:
    EXTRA[_n] = AFTER_BL


def unicode_probes():
    """Edge cases for the nm_* fixtures: every code point where HF's normalizers (NFC/NFD/NFKC/NFKD and
    StripAccents: Unicode 9.0; Lowercase: Rust's, 17.0) and utf8proc 2.8 (15.0) can part - the ones assigned
    after 9.0 that decompose, have a combining class or are marks, each in "a c U+0345 c b c U+0301" (a class
    below 240 moves it before U+0345), the decomposed forms of the composites among them (NFC would compose
    them), the three whose category changed since 9.0, and the case blocks of 16.0/17.0 - 60 to a line.
    Needs unicodedataplus 16.0.0.post1 (the UCD's Age)."""
    import unicodedataplus as ucd
    cps = []
    for cp in range(0x80, 0x110000):
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000 or not ucd.age(ch)[:1].isdigit():
            continue
        if tuple(int(x) for x in ucd.age(ch).split(".")) <= (9, 0):
            continue
        if ucd.decomposition(ch) or ucd.combining(ch) or ucd.category(ch)[0] == "M":
            cps.append(cp)
    cps += [0x1CF2, 0x1CF3, 0x111C9, 0x1C89, 0x1C8A] + list(range(0xA7C0, 0xA7E0)) + list(range(0x10D50, 0x10D66))
    cps += list(range(0x16EA0, 0x16EB9))
    out = []
    for k in range(0, len(cps), 60):
        t = ""
        for cp in cps[k:k + 60]:
            c = chr(cp)
            t += "a" + c + "\u0345" + c + "b" + c + "\u0301 " + ucd.normalize("NFD", c) + " "
        out.append(t)
    return out


for _n in ["nm_nfc", "nm_nfd", "nm_nfkc", "nm_nfkd", "nm_lower", "nm_strip_accents"]:
    EXTRA[_n] = unicode_probes


def punct_probes():
    """Edge cases for bl_punct_unicode: every code point that is punctuation to the UCD 16.0 (P*) or to HF's
    Punctuation pre-tokenizer (older tables), each in "a c b", 60 to a line. Needs unicodedataplus."""
    import unicodedataplus as ucd
    from tokenizers.pre_tokenizers import Punctuation
    pt = Punctuation()
    cps = [cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp < 0xE000 and
           (ucd.category(chr(cp))[0] == "P" or len(pt.pre_tokenize_str("a" + chr(cp) + "b")) == 3)]
    return ["".join("a" + chr(cp) + "b " for cp in cps[k:k + 60]) for k in range(0, len(cps), 60)]


EXTRA["bl_punct_unicode"] = punct_probes
# fixtures checked on every corpus document (not a third): their constructs are rare per document
FULL = ("bl_missing", "bl_raw", "bl_clip")


def ids_sha(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:16]


def tokenizers():
    out = []
    for name in ["llama3", "qwen2"]:
        p = os.path.join(SHARED, "vocab", "hf", name, "tokenizer.json")
        if os.path.exists(p):
            out.append((name, p, True))
    for p in sorted(glob.glob(os.path.join(DATA, "*.json"))):
        out.append((os.path.basename(p)[:-5], p, False))
    return out


def main():
    lines = []
    if ONLY:  # keep every other tokenizer's lines
        with open(os.path.join(DATA, "refs.jsonl.zst"), "rb") as f:
            old = zstandard.ZstdDecompressor().stream_reader(f).read().decode("utf-8")
        lines = [l for l in old.split("\n") if l and json.loads(l)["tok"] not in ONLY]
    docs = list(corpus())
    for name, path, real in tokenizers():
        if ONLY and name not in ONLY:
            continue
        tk = Tokenizer.from_file(path)
        for mode in ["plain", "special"]:
            tk.encode_special_tokens = mode == "plain"
            extra = EXTRA.get(name, [])
            for text in edge_cases() + (extra() if callable(extra) else extra):
                ids = tk.encode(text, add_special_tokens=False).ids
                rec = {"tok": name, "mode": mode, "text": text, "ids": ids}
                if name.startswith("sp_") and mode == "plain":
                    rec["dec"] = tk.decode(ids, skip_special_tokens=False)  # the decoder chain
                lines.append(json.dumps(rec, ensure_ascii=False))
        tk.encode_special_tokens = True
        # corpus: every document for the real tokenizers, a third for fixtures
        for cat, i, text in docs:
            if not real and i % 3 and not name.startswith(FULL):
                continue
            ids = tk.encode(text, add_special_tokens=False).ids
            lines.append(json.dumps({"tok": name, "cat": cat, "doc": i, "n": len(ids), "sha": ids_sha(ids)}))
        print(name, "done", file=sys.stderr)
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, "refs.jsonl.zst"), "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(raw))


if __name__ == "__main__":
    main()
