#!/usr/bin/env python3
"""tests/data/tk_spm/bpe_nul_piece.model and its rows in refs.jsonl.zst (made with `sentencepiece` 0.2.3).

    python3 tests/ref/make_tk_spm_nul_fixture.py [SHARED_DIR]

bpe_ident_bf.model (identity, byte fallback) with one more piece, "\\0" (a single NUL byte) of type NORMAL,
as InternLM's V7_sft.model has at id 354 beside <0x00>. sentencepiece 0.2.3 loads such a model (a NUL
piece of a byte-fallback model is made UNUSED and left out of its piece maps) where mkshards refused it
("piece contains a NUL byte"). The rows are model_rows' (doc, edge and decode rows, spm_fixtures_common.py)
plus NUL edge cases; the rows of the other models in refs.jsonl.zst are kept as they are.
"""
import json
import os
import random
import sys

import zstandard
from sentencepiece import sentencepiece_model_pb2 as pb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spm_fixtures_common as common  # noqa: E402

DATA = os.path.join(common.HERE, "..", "data", "tk_spm")
NAME = "bpe_nul_piece"
NUL_EDGES = ["\x00", "a\x00b", "\x00\x00 x\x00", " \x00 \x00\x00\x00hello"]


def add_nul(m):
    p = m.pieces.add()
    p.piece = "\x00"
    p.score = -100.0
    p.type = pb.ModelProto.SentencePiece.NORMAL


def main():
    path = common.edit(os.path.join(DATA, "bpe_ident_bf.model"), os.path.join(DATA, NAME + ".model"), add_nul)
    docs = {c: common.corpus(c) for c in common.CATS}
    rows = common.model_rows(NAME, path, docs, common.EDGE + common.EDGE_BYTES + NUL_EDGES, random.Random(27), 60,
                             broken_start_every=5)
    ref = os.path.join(DATA, "refs.jsonl.zst")
    with open(ref, "rb") as f:
        old = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
    kept = [json.loads(l) for l in old.split("\n") if l and json.loads(l).get("model") != NAME]
    common.write_refs(DATA, kept + rows)


if __name__ == "__main__":
    main()
