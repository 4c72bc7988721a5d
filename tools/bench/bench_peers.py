#!/usr/bin/env python3
"""Built-in encodings vs the fastest peers, by category and document size.

    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install tiktoken bpe-openai
    /tmp/bench-venv/bin/python tools/bench/bench_peers.py [--mkshards build/tools/mkshards]

For gpt2, cl100k_base and o200k_base, and for each cell (category x size
bucket) of held-out documents, one run measures:

  mkshards    `mkshards encode --threads 1` as a whole process on a JSONL file
              of the cell's documents: exec, vocabulary load, reading and JSON
              parsing, encoding, writing the ids (the vocabulary's table image
              is written by the first run and mapped by the others, as in any
              use after the first; start-up without it is reported too);
  tiktoken    in-process `Encoding.encode_ordinary(doc)` for each document,
              documents already in memory (vocabulary load not timed);
  bpe-openai  in-process encode of the rust-gems `bpe-openai` binding
              (`bpe_openai._bindings.tokenizer_for_encoding(name).encode`, the
              Rust call without the package's Python wrapper), likewise.

Wall time and CPU time are both reported: for mkshards user+sys of the child
process (getrusage RUSAGE_CHILDREN), for the peers time.process_time() of this
process. Each figure is the best of --repeat rounds; in each round the three
contenders run one after the other (interleaved), so a burst of load from
other jobs hits all of them. Python's garbage collector is off while a peer
is timed. Ids are compared: mkshards' and bpe-openai's against tiktoken's, per
document. See tools/bench/README.md for the selection of documents.
"""
import argparse
import gc
import glob
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]
CATEGORIES = [("web", "web"), ("code", "code"), ("books", "en-books"), ("multi", "multi")]
BUCKETS = [("<1K", 0, 1000), ("1-10K", 1000, 10_000), ("10-100K", 10_000, 100_000), ("100-400K", 100_000, 400_000)]
ORACLE_DOCS = 300     # the first 300 documents of each category are the parity oracle's (tuned on): skipped
MAX_CHARS = 400_000   # bpe-openai's Python package refuses longer inputs; the same bound for every contender
# books: every one of the 52 is within the first 300 (and over 400k characters), so book
# documents are excerpts cut at paragraph breaks, from a fixed random generator
BOOK_EXCERPTS = {"<1K": 400, "1-10K": 300, "10-100K": 60, "100-400K": 8}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def bucket_of(nchars):
    for name, lo, hi in BUCKETS:
        if lo <= nchars < hi:
            return name
    return None


def read_category(corpus, fname):
    out = subprocess.run(["zstd", "-dc", os.path.join(corpus, f"{fname}.jsonl.zst")], check=True,
                         stdout=subprocess.PIPE).stdout
    return [json.loads(line)["text"] for line in out.splitlines() if line.strip()]


def book_excerpts(books, rng):
    """Excerpts of each bucket's size range (log-uniform), starting and ending at a paragraph break."""
    cells = {}
    for bname, lo, hi in BUCKETS:
        docs = []
        for k in range(BOOK_EXCERPTS[bname]):
            b = books[k % len(books)]
            want = int(round(lo * (hi / max(lo, 200)) ** rng.random())) if lo else rng.randint(200, hi - 1)
            want = max(lo, min(hi - 1, want))
            start = b.find("\n\n", rng.randrange(0, max(1, len(b) - want - 1)))
            start = 0 if start < 0 else start + 2
            end = b.rfind("\n\n", start, start + want)
            text = b[start:end] if end > start + lo else b[start:start + want]
            if bucket_of(len(text)) == bname and text.strip():
                docs.append(text)
        cells[bname] = docs
    return cells


def select(corpus, cell_bytes):
    """{(category, bucket): [docs]}: held-out documents under MAX_CHARS, at most cell_bytes of UTF-8 per cell."""
    cells = {}
    rng = random.Random(15)
    for cat, fname in CATEGORIES:
        docs = read_category(corpus, fname)
        if cat == "books":
            per = book_excerpts(docs, rng)
        else:
            per = {b[0]: [] for b in BUCKETS}
            for d in docs[ORACLE_DOCS:]:
                b = bucket_of(len(d))
                if b:
                    per[b].append(d)
        for bname, _, _ in BUCKETS:
            chosen, total = [], 0
            for d in per[bname]:
                if cell_bytes and total >= cell_bytes:
                    break
                chosen.append(d)
                total += len(d.encode("utf-8"))
            if chosen:
                cells[(cat, bname)] = chosen
    return cells


def tiktoken_encoding(vocab, name):
    from bench_encode import tiktoken_encoding as te
    return te(vocab, name)


def run_mkshards(mks, vocab, name, path, ids_out, env=None):
    """(wall s, cpu s) of one `mkshards encode --threads 1` process."""
    cmd = [mks, "encode", "--tokenizer", os.path.join(vocab, f"{name}.tiktoken"), "--threads", "1",
           "--ids-out", ids_out, path]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:400]}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def run_inproc(fn, docs):
    """(wall s, cpu s, ids) of fn over every document, in this process."""
    gc.disable()
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        ids = [fn(d) for d in docs]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.enable()
    return wall, cpu, ids


def read_ids(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def diff_docs(a, b):
    return sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.normpath(os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--encodings", default=",".join(ENCODINGS))
    ap.add_argument("--categories", default=",".join(c for c, _ in CATEGORIES))
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds per cell; the best counts (default 5)")
    ap.add_argument("--cell-mb", type=float, default=4.0,
                    help="at most this many MB of text per cell (documents in corpus order; default 4, 0 = all)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    mks = os.path.abspath(args.mkshards)
    if not os.access(mks, os.X_OK):
        sys.exit(f"bench: {mks} not found: build first or pass --mkshards")
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        sys.exit("bench: needs tiktoken and bpe-openai (pip install tiktoken bpe-openai, e.g. in a venv)")
    try:
        import bpe_openai
        from bpe_openai import _bindings as bo_bind
    except ImportError:
        sys.exit("bench: needs bpe-openai (pip install bpe-openai)")
    vocab = os.path.join(args.shared, "vocab")
    corpus = os.path.join(args.shared, "corpus")
    encodings = [e for e in args.encodings.split(",") if e]
    cats = [c for c in args.categories.split(",") if c]
    reps = max(1, args.repeat)

    log("bench: selecting documents ...")
    cells = {k: v for k, v in select(corpus, int(args.cell_mb * 1e6)).items() if k[0] in cats}
    tmp = tempfile.mkdtemp(prefix="mks_peers.")
    files = {}
    for (cat, b), docs in cells.items():
        p = os.path.join(tmp, f"{cat}.{b.replace('<', 'lt')}.jsonl")
        with open(p, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
        files[(cat, b)] = p
    empty = os.path.join(tmp, "empty.txt")
    open(empty, "w").close()
    ids_out = os.path.join(tmp, "out.ids")

    results, startup = [], {}
    bo_supported = set(bo_bind.supported_encodings())
    for name in encodings:
        log(f"bench: {name}: loading peers ...")
        tt = tiktoken_encoding(vocab, name)
        bo = bo_bind.tokenizer_for_encoding(name) if name in bo_supported else None
        st = [run_mkshards(mks, vocab, name, empty, os.devnull) for _ in range(max(5, reps))]
        cold_env = dict(os.environ, MKS_CACHE_DIR="off")
        sc = [run_mkshards(mks, vocab, name, empty, os.devnull, cold_env) for _ in range(max(5, reps))]
        startup[name] = (min(s[0] for s in st), min(s[1] for s in st), min(s[0] for s in sc), min(s[1] for s in sc))
        for (cat, b), docs in cells.items():
            nbytes = sum(len(d.encode("utf-8")) for d in docs)
            best = {k: [float("inf"), float("inf")] for k in ("mks", "tt", "bo")}
            ref = bo_ids = None
            for _ in range(reps):
                w, c = run_mkshards(mks, vocab, name, files[(cat, b)], ids_out)
                best["mks"] = [min(best["mks"][0], w), min(best["mks"][1], c)]
                w, c, ids = run_inproc(tt.encode_ordinary, docs)
                best["tt"] = [min(best["tt"][0], w), min(best["tt"][1], c)]
                ref = ref or ids
                if bo is not None:
                    w, c, ids = run_inproc(bo.encode, docs)
                    best["bo"] = [min(best["bo"][0], w), min(best["bo"][1], c)]
                    bo_ids = bo_ids or ids
            mks_bad = diff_docs(read_ids(ids_out), ref)
            bo_bad = None if bo is None else diff_docs(bo_ids, ref)
            r = dict(encoding=name, category=cat, bucket=b, docs=len(docs), bytes=nbytes,
                     mks_wall=best["mks"][0], mks_cpu=best["mks"][1], tt_wall=best["tt"][0], tt_cpu=best["tt"][1],
                     bo_wall=best["bo"][0] if bo is not None else None,
                     bo_cpu=best["bo"][1] if bo is not None else None, mks_bad=mks_bad, bo_bad=bo_bad)
            results.append(r)
            log(f"bench: {name} {cat:5} {b:8} {len(docs):5} docs {nbytes / 1e6:6.2f} MB  "
                f"tiktoken/ours wall {r['tt_wall'] / r['mks_wall']:.2f}x cpu {r['tt_cpu'] / r['mks_cpu']:.2f}x"
                + (f"  bpe-openai/ours wall {r['bo_wall'] / r['mks_wall']:.2f}x cpu {r['bo_cpu'] / r['mks_cpu']:.2f}x"
                   if bo is not None else ""))
        del tt, bo

    # ------------------------------------------------------------------ report
    print()
    print(f"Held-out documents under {MAX_CHARS} characters, 1 thread, best of {reps} interleaved rounds.")
    print("mkshards: whole `mkshards encode --threads 1` process (start-up, vocabulary load, JSONL read, encode,"
          " ids written); tiktoken (encode_ordinary) and bpe-openai (Rust binding's encode): in-process calls only.")
    print("x = peer time / mkshards time (> 1: mkshards faster); wall and CPU (user+sys) separately.")
    print()
    for name in encodings:
        s = startup[name]
        print(f"{name}: mkshards start-up (empty input, whole process): {s[0] * 1e3:.1f} ms wall, "
              f"{s[1] * 1e3:.1f} ms CPU with the table image (as in the cells below); without it "
              f"(MKS_CACHE_DIR=off: parse the rank file, build the tables) {s[2] * 1e3:.1f} ms wall, "
              f"{s[3] * 1e3:.1f} ms CPU")
    print()
    hdr = (f"| {'encoding':<11} | {'category':<8} | {'size':<8} | {'docs':>5} | {'MB':>6} | {'ours ms':>8} |"
           f" {'tiktoken ms':>11} | {'bpe-openai ms':>13} | {'x tiktoken wall/cpu':>19} |"
           f" {'x bpe-openai wall/cpu':>21} | {'ids != tiktoken (ours, bpe-openai)':>34} |")
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")

    def ratio(peer, ours):
        return "n/a" if peer is None else f"{peer / ours:.2f}"

    worst = {}
    for r in results:
        xt = f"{ratio(r['tt_wall'], r['mks_wall'])} / {ratio(r['tt_cpu'], r['mks_cpu'])}"
        xb = "n/a" if r["bo_wall"] is None else f"{ratio(r['bo_wall'], r['mks_wall'])} / {ratio(r['bo_cpu'], r['mks_cpu'])}"
        bo_ms = "n/a" if r["bo_wall"] is None else f"{r['bo_wall'] * 1e3:.1f}"
        bad = f"{r['mks_bad']}, {'n/a' if r['bo_bad'] is None else r['bo_bad']}"
        print(f"| {r['encoding']:<11} | {r['category']:<8} | {r['bucket']:<8} | {r['docs']:>5} | "
              f"{r['bytes'] / 1e6:>6.2f} | {r['mks_wall'] * 1e3:>8.1f} | {r['tt_wall'] * 1e3:>11.1f} | {bo_ms:>13} | "
              f"{xt:>19} | {xb:>21} | {bad:>34} |")
        w = worst.setdefault(r["encoding"], {"tt": [], "bo": []})
        w["tt"].append((min(r["tt_wall"] / r["mks_wall"], r["tt_cpu"] / r["mks_cpu"]), r["category"], r["bucket"]))
        if r["bo_wall"] is not None:
            w["bo"].append((min(r["bo_wall"] / r["mks_wall"], r["bo_cpu"] / r["mks_cpu"]), r["category"], r["bucket"]))
    print()
    for name in encodings:
        w = worst.get(name)
        if not w:
            continue
        lo_t = min(w["tt"])
        line = f"{name}: lowest x tiktoken {lo_t[0]:.2f} ({lo_t[1]} {lo_t[2]}; min of wall and CPU)"
        if w["bo"]:
            lo_b = min(w["bo"])
            line += f", lowest x bpe-openai {lo_b[0]:.2f} ({lo_b[1]} {lo_b[2]})"
        else:
            line += ", bpe-openai: no such encoding"
        print(line)
    print(f"peers: tiktoken {tiktoken.__version__}, bpe-openai {getattr(bpe_openai, '__version__', '?')} "
          f"(Rust backend {getattr(bo_bind, 'RUST_BACKEND_VERSION', '?')})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"startup": startup, "cells": results}, f, indent=1)
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
