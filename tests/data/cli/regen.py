#!/usr/bin/env python3
"""Regenerate the golden files of tests/cli_encode.sh (needs `pip install tiktoken`).

    python3 tests/data/cli/regen.py

Writes, next to this script:
  small.jsonl       the input documents ({"text": ...} per line, plus one record
                    with another field name to exercise --field)
  small.txt         each document's text followed by "\n" (what decode must print)
  small.gpt2.ids    one JSON array of gpt2 token ids per document (encode_ordinary),
                    computed by tiktoken from ../shared/vocab/gpt2.tiktoken
  lines.txt         one single-line document per line (for --doc-sep line)
  lines.gpt2.ids    the ids of each line of lines.txt

The encoding is built from the shared rank file (not downloaded) with the
pat_str tiktoken itself uses for gpt2, so the files match upstream tiktoken.
The test itself never runs Python.
"""
import json
import os

import tiktoken
import tiktoken_ext.openai_public as op
from tiktoken.load import load_tiktoken_bpe

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "..", "shared"))

DOCS = [
    "Hello, world! This is a small test of the encoder.",
    "The quick brown fox jumps over the lazy dog. It's 9:30 and we've got 1234567 reasons to test.",
    "Line one\nLine two\n\nA paragraph after a blank line.\n",
    "  leading spaces, trailing spaces   ",
    "Tabs\tand\tmixed   whitespace\r\nwindows line end",
    "Unicode: café naïve résumé, Grüße aus München, ¿qué tal?",
    "日本語のテキストと中文文本。",
    "Emoji: 😀🎉 and symbols ©®™ €100",
    "Code: for (int i = 0; i < n; i++) { sum += a[i]; } // done",
    "<|endoftext|> is ordinary text here, not a special token.",
    "",
    "Numbers 3.14159 2718281828 1e-9 0x7fff and dates 2026-12-02.",
    "I'm sure you'll see they'd LOVE it, wouldn't they? THEY'RE here.",
    "A longer one: " + " ".join(["the cat sat on the mat and looked at the hat"] * 20),
]
LINES = [
    "first line of the file",
    "second line, with punctuation!",
    "third line: numbers 42 and 1000000",
    "fourth line with unicode ü and ñ",
]


def gpt2_encoding():
    ranks = load_tiktoken_bpe(os.path.join(SHARED, "vocab", "gpt2.tiktoken"))
    pat = op.r50k_pat_str  # the pat_str tiktoken's gpt2() uses (op.gpt2() would download)
    return tiktoken.Encoding(name="gpt2-shared", pat_str=pat, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def write(name, text):
    with open(os.path.join(HERE, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)


def main():
    enc = gpt2_encoding()
    recs = [json.dumps({"text": d}, ensure_ascii=False) for d in DOCS]
    write("small.jsonl", "\n".join(recs) + "\n")
    write("small.txt", "".join(d + "\n" for d in DOCS))
    write("small.gpt2.ids", "".join(json.dumps(enc.encode_ordinary(d), separators=(",", ":")) + "\n" for d in DOCS))
    write("lines.txt", "".join(l + "\n" for l in LINES))
    write("lines.gpt2.ids", "".join(json.dumps(enc.encode_ordinary(l), separators=(",", ":")) + "\n" for l in LINES))
    print("tiktoken", tiktoken.__version__, "- wrote golden files to", HERE)


if __name__ == "__main__":
    main()
