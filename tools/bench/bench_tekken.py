#!/usr/bin/env python3
"""Mistral Tekken (tekken.json) encode speed: mkshards' tk_encode vs mistral_common's Tekkenizer, 1 thread, CPU time.

    python3 tools/bench/bench_tekken.py [--build build] [--shared ../shared] [--limit-mb 8] [--runs 3] [TEKKEN.json]

Per ../shared/corpus category, the first LIMIT MB of documents: Tekkenizer.encode(text, bos=False, eos=False)
in-process (tiktoken underneath, which holds the GIL-free Rust encoder on one thread), best of RUNS process CPU
time, load excluded; against tools/bench/tk_encode_time.c (tk_encode in-process, best of RUNS, CPU time, load
excluded), compiled here against BUILD's libraries. Default TEKKEN: mistral_common's tekken_240911.json (Mistral
NeMo). Needs: pip install mistral-common==1.13.1; the zstd CLI; cc.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CATS = ["en-books", "multi", "code", "web"]


def docs_of(shared, cat, limit):
    raw = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", cat + ".jsonl.zst")], check=True,
                         stdout=subprocess.PIPE).stdout
    out, total = [], 0
    for line in raw.splitlines():
        t = json.loads(line)["text"]
        out.append(t)
        total += len(t.encode())
        if total >= limit:
            break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--limit-mb", type=float, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("tekken", nargs="?")
    a = ap.parse_args()
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    path = a.tekken or os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    t0 = time.process_time()
    tk = Tekkenizer.from_file(path)
    print(f"{os.path.basename(path)}: mistral_common load {1e3 * (time.process_time() - t0):.0f} ms CPU")
    with tempfile.TemporaryDirectory() as td:
        exe = os.path.join(td, "tk_encode_time")
        libs = subprocess.run(["pkg-config", "--libs", "libutf8proc", "libpcre2-8", "jansson", "nettle", "libxxhash"],
                              check=True, stdout=subprocess.PIPE, text=True).stdout.split()
        subprocess.run(["cc", "-O2", "-I", os.path.join(ROOT, "tokenizer"),
                        os.path.join(ROOT, "tools", "bench", "tk_encode_time.c"),
                        os.path.join(a.build, "tokenizer", "libtk.a"),
                        os.path.join(a.build, "dataset", "common", "libmks_common.a")] + libs +
                       ["-lpthread", "-lm", "-o", exe], check=True)
        print(f"{'category':9} {'MB':>6} {'mistral_common MB/s':>20} {'(tiktoken alone)':>16} {'mkshards MB/s':>14} "
              f"{'ratio':>6}")
        for cat in CATS:
            docs = docs_of(a.shared, cat, a.limit_mb * 1e6)
            nbytes = sum(len(d.encode()) for d in docs)
            best = 1e9
            for _ in range(a.runs):
                c = time.process_time()
                for d in docs:
                    tk.encode(d, bos=False, eos=False)
                best = min(best, time.process_time() - c)
            raw = 1e9  # the tiktoken.Encoding inside, without Tekkenizer's id shift in Python
            for _ in range(a.runs):
                c = time.process_time()
                for d in docs:
                    tk._model.encode(d)
                raw = min(raw, time.process_time() - c)
            inp = os.path.join(td, cat + ".jsonl")
            with open(inp, "w") as f:
                for d in docs:
                    f.write(json.dumps({"text": d}) + "\n")
            out = subprocess.run([exe, str(a.runs), path, inp], check=True, stdout=subprocess.PIPE, text=True).stdout
            ours = float(re.search(r"encode ([0-9.]+) s CPU", out).group(1))
            print(f"{cat:9} {nbytes / 1e6:6.2f} {nbytes / best / 1e6:20.2f} {nbytes / raw / 1e6:16.2f} "
                  f"{nbytes / ours / 1e6:14.2f} {best / ours:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
