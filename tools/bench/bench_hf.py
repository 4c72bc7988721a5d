#!/usr/bin/env python3
"""HF tokenizer.json benchmark: `mkshards encode` vs HF `tokenizers`, 1 thread.

    python3 tools/bench/bench_hf.py [--mkshards build/tools/mkshards] [--shared ../shared]
                                    [--limit-mb 20] [--tokenizers llama3,qwen2] [--files A.json,B.json]

For each tokenizer of SHARED/vocab/hf: HF tokenizers (RAYON_NUM_THREADS=1,
encode_special_tokens=True, add_special_tokens=False, one document at a time,
in-process, load excluded) against `mkshards encode -j 1` as a whole process
(load, read, encode, write ids included) on the same documents: the first
LIMIT MB of every corpus category, round-robin. Also the load time of the
tokenizer.json (`mkshards encode` of an empty input, best of 5) and HF's
Tokenizer.from_file. Needs: pip install tokenizers; the zstd CLI.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CATS = ["en-books", "multi", "code", "web"]


def docs_of(shared, limit):
    out = []
    for cat in CATS:
        raw = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", cat + ".jsonl.zst")], check=True,
                             stdout=subprocess.PIPE).stdout
        total = 0
        for line in raw.splitlines():
            t = json.loads(line)["text"]
            out.append(t)
            total += len(t.encode())
            if total >= limit / len(CATS):
                break
    return out


def best(f, n):
    r = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        r.append(time.perf_counter() - t)
    return min(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--limit-mb", type=float, default=20)
    ap.add_argument("--tokenizers", default="llama3,qwen2")
    ap.add_argument("--files", default="", help="comma-separated tokenizer.json paths, benched after --tokenizers "
                    "(e.g. the Unigram fixtures: tests/data/tk_hf_uni/t5_nmt.json)")
    a = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"
    from tokenizers import Tokenizer

    docs = docs_of(a.shared, a.limit_mb * (1 << 20))
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"{len(docs)} documents, {nbytes / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory() as td:
        inp = os.path.join(td, "in.jsonl")
        with open(inp, "w") as f:
            for d in docs:
                f.write(json.dumps({"text": d}) + "\n")
        empty = os.path.join(td, "empty.jsonl")
        open(empty, "w").close()
        # wall figures as before; CPU figures (HF in-process CPU time, mkshards' whole process from
        # RUSAGE_CHILDREN) hold on a shared, loaded machine where wall time does not
        print(f"{'tokenizer':14} {'HF MB/s':>8} {'mkshards MB/s':>14} {'ratio':>6} {'CPU ratio':>9} {'load ms':>8} "
              f"{'load CPU ms':>11} {'HF load ms':>10}")
        paths = [(n, os.path.join(a.shared, "vocab", "hf", n, "tokenizer.json")) for n in a.tokenizers.split(",") if n]
        paths += [(os.path.basename(p)[:-5], p) for p in a.files.split(",") if p]
        for name, path in paths:
            hf_load = best(lambda: Tokenizer.from_file(path), 3)
            tk = Tokenizer.from_file(path)
            tk.encode_special_tokens = True
            c0 = time.process_time()
            hf = best(lambda: [tk.encode(d, add_special_tokens=False) for d in docs], 1)
            hf_cpu = time.process_time() - c0
            cmd = [a.mkshards, "encode", "-j", "1", "--tokenizer", path, "--ids-out", os.path.join(td, "ids")]
            ms_cpu = []

            def run(c, acc):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run(c, check=True)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                acc.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            ms = best(lambda: run(cmd + [inp], ms_cpu), 3)
            load_cpu = []
            load = best(lambda: run(cmd + [empty], load_cpu), 5)
            print(f"{name:14} {nbytes / hf / 1e6:8.2f} {nbytes / ms / 1e6:14.2f} {hf / ms:6.1f} "
                  f"{hf_cpu / min(ms_cpu):9.1f} {load * 1e3:8.0f} {min(load_cpu) * 1e3:11.0f} {hf_load * 1e3:10.0f}",
                  flush=True)


if __name__ == "__main__":
    main()
