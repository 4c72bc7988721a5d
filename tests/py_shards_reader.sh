#!/bin/bash
# The numpy-only reader (tools/python/mkshards_reader.py) against a built set:
# row counts and token sums agree with the manifest, ids < vocab, masks and
# positions agree with `mkshards inspect --row I --ids` (the C reader), and a
# zstd-compressed build reads back the same rows.
# Args: mkshards shared-dir tests-data-dir. Exit 77 if numpy is unavailable.
set -u
M=$1 SHARED=$2 DATA=$3
HERE=$(cd "$(dirname "$0")" && pwd)
export MKS_VOCAB_DIR=$SHARED/vocab
PY=${PYTHON:-python3}
if ! $PY -c 'import numpy' 2>/dev/null; then
  $PY -m pip install -q numpy >/dev/null 2>&1 || true
  $PY -c 'import numpy' 2>/dev/null || { echo "skip: numpy not importable"; exit 77; }
fi
T=$(mktemp -d /tmp/py_shards.XXXXXX)
trap 'rm -rf "$T"' EXIT
IN="$DATA/clean $HERE/../samples/tiny.jsonl $DATA/bad"
"$M" build -q -t gpt2 -L 96 --pack bfd --val-fraction 0.25 --shard-tokens 4K -o "$T/a" $IN || exit 1
"$M" build -q -t gpt2 -L 96 --pack bfd --val-fraction 0.25 --shard-tokens 4K --zstd 3 --frame-rows 8 -o "$T/z" $IN || exit 1
for r in 0 7 31; do "$M" inspect --ids --row $r "$T/a" > "$T/row$r.txt" || exit 1; done
"$M" inspect --ids --split val --row 3 "$T/a" > "$T/valrow3.txt" || exit 1
PYTHONPATH="$HERE/../tools/python" $PY - "$T" <<'PYEOF'
import re, sys, json
import numpy as np
from mkshards_reader import ShardSet
T = sys.argv[1]
ds = ShardSet(T + "/a")
m = ds.manifest
fails = 0
def check(c, msg):
    global fails
    if not c:
        print("FAIL:", msg); fails += 1
for split in ("train", "val"):
    n = ds.num_rows(split)
    check(n == m["splits"][split]["rows"], f"{split} rows {n}")
    tok = 0
    for r in ds.rows(split):
        tok += int(r["loss_mask"].sum())
        check(r["tokens"].max() < ds.vocab_size, "id >= vocab")
        nv = r["n_valid"]
        check((r["tokens"][nv:] == ds.pad_id).all(), "padding holds the pad id")
        check(r["pos_ids"][0] == 0 and r["doc_ids"][0] == 0, "row starts a segment")
    check(tok == m["splits"][split]["tokens"], f"{split} tokens {tok} vs manifest")
def parse(path):
    segs, pad = [], None
    lines = open(path).read().splitlines()
    for i, l in enumerate(lines):
        g = re.match(r"\s+segment (\d+): positions (\d+)-(\d+)", l)
        if g:
            segs.append((int(g[1]), int(g[2]), int(g[3]), [int(x) for x in lines[i + 1].split()]))
        g = re.match(r"\s+padding: positions (\d+)-(\d+)", l)
        if g:
            pad = (int(g[1]), int(g[2]))
    return segs, pad
for name, split, i in [("row0", "train", 0), ("row7", "train", 7), ("row31", "train", 31), ("valrow3", "val", 3)]:
    r = ds.row(i, split)
    segs, pad = parse(f"{T}/{name}.txt")
    check(len(segs) > 0, f"{name}: inspect printed segments")
    for d, a, b, ids in segs:
        check(list(r["tokens"][a:b + 1]) == ids, f"{name}: tokens of segment {d}")
        check((r["doc_ids"][a:b + 1] == d).all(), f"{name}: doc ids of segment {d}")
        check((r["pos_ids"][a:b + 1] == np.arange(b - a + 1)).all(), f"{name}: positions of segment {d}")
        check((r["loss_mask"][a:b + 1] == 1).all(), f"{name}: loss mask of segment {d}")
    if pad:
        check((r["loss_mask"][pad[0]:] == 0).all() and r["n_valid"] == pad[0], f"{name}: padding")
    else:
        check(r["n_valid"] == ds.seq_len, f"{name}: full row")
try:
    import zstandard  # noqa: F401
    dz = ShardSet(T + "/z")
    for split in ("train", "val"):
        check(dz.num_rows(split) == ds.num_rows(split), "zstd rows")
        for i in range(ds.num_rows(split)):
            a, b = ds.row(i, split), dz.row(i, split)
            if not all((a[k] == b[k]).all() for k in ("tokens", "loss_mask", "pos_ids", "doc_ids")):
                check(False, f"zstd row {i} differs"); break
    print("zstd set: same rows")
except ImportError:
    print("zstandard not installed: compressed read not checked")
print("python reader:", "FAIL" if fails else "ok", f"({ds.num_rows('train')} train rows, {ds.num_rows('val')} val rows)")
sys.exit(1 if fails else 0)
PYEOF
