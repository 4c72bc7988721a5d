#!/usr/bin/env python3
"""Shard-building benchmark: `mkshards build` vs the Python pipeline people use
today (llm.c's fineweb.py: tiktoken + multiprocessing writing uint16 tokens),
and vs `mkshards encode` on the same input.

    python3 tools/bench/bench_build.py [--mkshards build/tools/mkshards] [--seq-len 1024]

Installs tiktoken with pip if it is missing. Uses ../shared/corpus/*.jsonl.zst and
../shared/vocab/gpt2.tiktoken (nothing is downloaded). See tools/bench/README.md.
"""
import argparse
import glob
import io
import json
import multiprocessing as mp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def ensure_tiktoken():
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        log("bench: installing tiktoken with pip")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "tiktoken"], check=True)


# ------------------------------------------------------- the Python pipeline
# Modelled on llm.c dev/data/fineweb.py: a Pool of nprocs workers tokenizes
# documents (eot + encode_ordinary), the parent concatenates the uint16 arrays
# into shards and writes them with a 256-int32 header. Here the documents are
# also read (zstd + JSON) inside the timed region, as mkshards has to, and the
# token stream is cut into rows of seq_len (the last partial row is padded).
_enc = None


def _init(vocab_dir):
    global _enc
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_encode import tiktoken_encoding
    _enc = tiktoken_encoding(vocab_dir, "gpt2")


def _tokenize(doc):
    import numpy as np
    toks = [_enc.eot_token]
    toks.extend(_enc.encode_ordinary(doc))
    return np.array(toks, dtype=np.uint16)


def _tokenize_batch(docs):
    import numpy as np
    eot = _enc.eot_token
    return [np.array([eot] + t, dtype=np.uint16) for t in _enc.encode_ordinary_batch(docs, num_threads=1)]


def _read_docs(files):
    try:
        import zstandard
    except ImportError:
        zstandard = None
    for f in files:
        if zstandard:
            with open(f, "rb") as fh:
                text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(fh), encoding="utf-8")
                for line in text:
                    if line.strip():
                        yield json.loads(line)["text"]
        else:
            out = subprocess.run(["zstd", "-dc", f], check=True, stdout=subprocess.PIPE).stdout
            for line in out.splitlines():
                if line.strip():
                    yield json.loads(line)["text"]


def _batched(it, n):
    b = []
    for x in it:
        b.append(x)
        if len(b) == n:
            yield b
            b = []
    if b:
        yield b


def python_pipeline(files, vocab_dir, out_dir, seq_len, nprocs, shard_tokens, mode):
    import numpy as np
    os.makedirs(out_dir, exist_ok=True)
    rows_per_shard = max(1, shard_tokens // seq_len)
    buf = np.empty(rows_per_shard * seq_len, dtype=np.uint16)
    fill, shard, total = 0, 0, 0

    def write(n_tokens):
        nonlocal shard
        rows = (n_tokens + seq_len - 1) // seq_len
        if rows * seq_len > n_tokens:
            buf[n_tokens:rows * seq_len] = 50256  # pad the last row
        header = np.zeros(256, dtype=np.int32)
        header[0], header[1], header[2], header[3] = 20240520, 1, rows * seq_len, seq_len
        with open(os.path.join(out_dir, f"shard_{shard:06d}.bin"), "wb") as f:
            f.write(header.tobytes())
            f.write(buf[:rows * seq_len].tobytes())
        shard += 1

    with mp.Pool(nprocs, initializer=_init, initargs=(vocab_dir,)) as pool:
        if mode == "batch":
            stream = (a for lst in pool.imap(_tokenize_batch, _batched(_read_docs(files), 64)) for a in lst)
        else:
            stream = pool.imap(_tokenize, _read_docs(files), chunksize=16)
        for toks in stream:
            i = 0
            while i < len(toks):
                k = min(len(buf) - fill, len(toks) - i)
                buf[fill:fill + k] = toks[i:i + k]
                fill += k
                i += k
                if fill == len(buf):
                    write(fill)
                    fill = 0
            total += len(toks)
    if fill:
        write(fill)
    return total


# ------------------------------------------------------------------- main
def cpu_now():
    """CPU seconds (user + sys) of this process and its waited-for children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def timed(cmd):
    t0, c0 = time.perf_counter(), cpu_now()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt, dc = time.perf_counter() - t0, cpu_now() - c0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:400]}")
    return dt, dc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=2, help="runs per contender; the fastest is reported")
    ap.add_argument("--py-mode", choices=["fineweb", "batch"], default="fineweb",
                    help="fineweb: Pool.imap(encode_ordinary, chunksize=16) as llm.c; "
                         "batch: Pool.imap over 64-doc lists with encode_ordinary_batch")
    ap.add_argument("--shard-tokens", type=int, default=32 << 20)
    args = ap.parse_args()

    ensure_tiktoken()
    vocab = os.path.join(args.shared, "vocab")
    files = sorted(glob.glob(os.path.join(args.shared, "corpus", "*.jsonl.zst")))
    if not files or not os.path.exists(args.mkshards):
        sys.exit("bench: need ../shared/corpus/*.jsonl.zst and a built mkshards (--mkshards)")
    tok = os.path.join(vocab, "gpt2.tiktoken")
    text_bytes = sum(len(json.loads(l)["text"].encode()) for f in files
                     for l in subprocess.run(["zstd", "-dc", f], check=True, stdout=subprocess.PIPE).stdout.splitlines()
                     if l.strip())
    tmp = tempfile.mkdtemp(prefix="bench_build_")
    res = {}
    try:
        def best(name, fn):
            ts = []
            for r in range(args.repeat):
                ts.append(fn())
                log(f"  {name} run {r + 1}: {ts[-1][0]:.2f} s wall, {ts[-1][1]:.2f} s CPU")
            res[name] = (min(t[0] for t in ts), min(t[1] for t in ts))

        def build():
            shutil.rmtree(os.path.join(tmp, "mks"), ignore_errors=True)
            return timed([args.mkshards, "build", "-q", "-t", tok, "-L", str(args.seq_len), "-j", str(args.threads),
                          "--shard-tokens", str(args.shard_tokens), "-o", os.path.join(tmp, "mks"), *files])

        def encode():
            return timed([args.mkshards, "encode", "-t", tok, "-j", str(args.threads), "--ids-out", os.devnull, *files])

        def python():
            shutil.rmtree(os.path.join(tmp, "py"), ignore_errors=True)
            t0, c0 = time.perf_counter(), cpu_now()
            python_pipeline(files, vocab, os.path.join(tmp, "py"), args.seq_len, args.threads, args.shard_tokens,
                            args.py_mode)
            return time.perf_counter() - t0, cpu_now() - c0

        best("mkshards build", build)
        best("mkshards encode", encode)
        best(f"python ({args.py_mode})", python)
        py = f"python ({args.py_mode})"
        man = json.load(open(os.path.join(tmp, "mks", "manifest.json")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    mb = text_bytes / 1e6
    print(f"Corpus: {len(files)} files, {mb:.1f} MB of text; gpt2, seq-len {args.seq_len}, {args.threads} threads/processes;"
          f" best of {args.repeat}. load average at the end: {os.getloadavg()[0]:.2f}")
    print(f"mkshards build: {man['splits']['train']['rows']} rows, utilisation {man['accounting']['utilisation']}\n")
    print("| pipeline | wall s | MB/s | CPU s (user+sys, all processes) |")
    print("|---|---:|---:|---:|")
    for k, (w, c) in res.items():
        print(f"| {k} | {w:.2f} | {mb / w:.1f} | {c:.2f} |")
    b, e, p = res["mkshards build"], res["mkshards encode"], res[py]
    print(f"\nbuild speed-up over the Python pipeline: {p[0] / b[0]:.2f}x wall, {p[1] / b[1]:.2f}x CPU (target >= 3x)")
    print(f"build / encode: {b[0] / e[0]:.2f} wall, {b[1] / e[1]:.2f} CPU (target <= 1.25)")


if __name__ == "__main__":
    main()
