#!/usr/bin/env python3
"""lint / hist throughput vs `mkshards encode` alone on the same input.

    python3 tools/bench/bench_lint.py [--mkshards build/tools/mkshards]
        [--shared ../shared] [--tokenizer cl100k_base] [--seq-len 2048]
        [--threads N] [--repeat 3] [--json out.json]

Input: every ../shared/corpus/*.jsonl.zst (the oracle/ folder holds token ids,
not documents, and is left out). Each command is a whole process (start-up,
vocabulary load, zstd + JSON reading, work, output to /dev/null); the best of
--repeat runs is kept (the machine may be shared). MB/s = text bytes of the
documents (76.8 MB for the shared corpus) / seconds.

Rows, at 1 thread and at all threads:
  encode        mkshards encode -t T --ids-out /dev/null   (the reference)
  lint          mkshards lint -t T -L L                    (tokenizer on: one tk_count per doc)
  lint-bytes    mkshards lint                              (no tokenizer: byte rules only)
  hist          mkshards hist -t T -L L
  lint+hist     mkshards lint -t T -L L --hist             (one pass for both)
  lint;hist     lint, then hist as two commands (sum of the two times)
ratio = seconds / encode seconds at the same thread count, for wall time and
for CPU time (user+sys; steadier when other jobs share the machine). Target:
lint+hist <= 1.25x encode.
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run(cmd, repeat):
    """Best wall seconds and best CPU seconds (user+sys) over `repeat` runs."""
    best, best_cpu = None, None
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        dt = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if p.returncode not in (0, 1, 2):
            sys.exit(f"bench_lint: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode()[-400:]}")
        best = dt if best is None else min(best, dt)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
    return best, best_cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.normpath(os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.shared, "corpus", "*.jsonl.zst")))
    if not files:
        sys.exit(f"bench_lint: no corpus in {a.shared}/corpus")
    os.environ.setdefault("MKS_VOCAB_DIR", os.path.join(a.shared, "vocab"))
    M, T, L = a.mkshards, a.tokenizer, str(a.seq_len)
    # text bytes: from a hist run (exact, same reader)
    out = subprocess.run([M, "hist", "-t", T, "--json"] + files, check=True, stdout=subprocess.PIPE).stdout
    h = json.loads(out)
    text_bytes, docs, tokens = h["bytes"], h["docs"], h["tokens"]
    print(f"input: {len(files)} files, {docs} docs, {text_bytes/1e6:.1f} MB text, {tokens} tokens ({T}); "
          f"best of {a.repeat}")
    results = []
    for th in sorted({1, a.threads}):
        j = ["-j", str(th)]
        rows = {
            "encode": [M, "encode", "-t", T] + j + files + ["--ids-out", "/dev/null"],
            "lint": [M, "lint", "-t", T, "-L", L] + j + files,
            "lint-bytes": [M, "lint"] + j + files,
            "hist": [M, "hist", "-t", T, "-L", L] + j + files,
            "lint+hist": [M, "lint", "-t", T, "-L", L, "--hist"] + j + files,
        }
        secs = {k: run(v, a.repeat) for k, v in rows.items()}
        secs["lint;hist"] = tuple(x + y for x, y in zip(secs["lint"], secs["hist"]))
        print(f"\nthreads {th}")
        print(f"  {'command':<11} {'wall s':>7} {'MB/s':>7} {'x encode':>9} {'cpu s':>7} {'cpu x enc':>9}")
        ew, ec = secs["encode"]
        for k in ["encode", "lint", "lint-bytes", "hist", "lint+hist", "lint;hist"]:
            w, c = secs[k]
            print(f"  {k:<11} {w:7.2f} {text_bytes/1e6/w:7.1f} {w/ew:9.2f} {c:7.2f} {c/ec:9.2f}")
            results.append({"threads": th, "command": k, "seconds": w, "cpu_seconds": c,
                            "mb_s": text_bytes / 1e6 / w, "ratio_to_encode": w / ew, "cpu_ratio_to_encode": c / ec})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"text_bytes": text_bytes, "docs": docs, "tokens": tokens, "tokenizer": T,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
