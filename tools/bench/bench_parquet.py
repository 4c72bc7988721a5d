#!/usr/bin/env python3
"""bench_parquet.py - `mkshards build` from Parquet against the same
documents as JSONL, and against a Hugging Face `datasets` pipeline (issue 29
item 5: Parquet >= 90% of the JSONL build throughput at 2 threads, and >= 5x
faster than `datasets.map(tokenizer)` + `save_to_disk` with a fast HF
tokenizer and num_proc=2).

The shared corpus (../shared/corpus/*.jsonl.zst) is decompressed once into a
temporary folder as one .jsonl and written by pyarrow as one .parquet
(snappy, the default of pyarrow and `datasets.to_parquet`; --row-group rows
per row group). Builds of both alternate (--repeat times each, so background
load hits both alike); the median wall times, throughputs and their ratio
are printed, and the shards of the two builds compared byte for byte.
The HF pipeline (--hf, needs datasets, tokenizers, transformers): load the
same .parquet with datasets.load_dataset("parquet"), map a
GPT2TokenizerFast (from ../shared/vocab/encoder.json + vocab.bpe: the same
BPE as mkshards' gpt2) over batches of 1000 with num_proc=2, save_to_disk;
its wall time (cache in a fresh temporary folder) against mkshards' median.

--python: the same documents through the Python package (import mkshards; run
it with the package on PYTHONPATH): mkshards.lint (byte checks, no tokenizer:
what the source itself costs) and mkshards.build from a pyarrow.Table in
memory, and mkshards.build from the .parquet path (read by pyarrow), docs/s.

  python3 tools/bench/bench_parquet.py [--mkshards build/tools/mkshards]
      [--shared ../shared] [--threads 2] [--repeat 5] [--row-group 4096] [--hf] [--python]
"""
import argparse
import filecmp
import glob
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_build(mks, inp, out, threads, env):
    """(wall s, CPU s of the build process: user + sys, peak RSS MiB)"""
    shutil.rmtree(out, ignore_errors=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", mks, "build", "-t", "gpt2", "-L", "1024", "-j", str(threads),
                        "-o", out, inp], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), rss


def hf_pipeline(parquet, vocab, tmp, num_proc):
    """datasets.load_dataset + map(fast tokenizer, num_proc) + save_to_disk: wall s"""
    import datasets
    from transformers import GPT2TokenizerFast
    tok = GPT2TokenizerFast(vocab_file=os.path.join(vocab, "encoder.json"),
                            merges_file=os.path.join(vocab, "vocab.bpe"))
    cache = os.path.join(tmp, "hf_cache")
    out = os.path.join(tmp, "hf_out")
    t = time.perf_counter()
    ds = datasets.load_dataset("parquet", data_files=parquet, split="train", cache_dir=cache)
    ds = ds.map(lambda b: tok(b["text"]), batched=True, batch_size=1000, num_proc=num_proc,
                remove_columns=ds.column_names)
    ds.save_to_disk(out)
    return time.perf_counter() - t, len(ds)


def py_sources(docs, parquet, tmp, threads, repeat):
    """docs/s of mkshards.lint / build from a pyarrow.Table and of build from the .parquet path (medians)"""
    import pyarrow as pa
    import mkshards
    table = pa.table({"text": pa.array(docs, pa.string())})
    # the same text as its non-empty lines: many short documents, where a per-row cost shows
    lines = pa.table({"text": pa.array([x for d in docs for x in d.split("\n") if x], pa.string())})
    runs = {"lint(Table), no tokenizer": lambda: mkshards.lint(table, threads=threads),
            "lint(Table of lines)": lambda: mkshards.lint(lines, threads=threads),
            "build(Table)": lambda: mkshards.build(table, os.path.join(tmp, "py_t"), tokenizer="gpt2",
                                                   seq_len=1024, threads=threads, force=True),
            "build('x.parquet')": lambda: mkshards.build(parquet, os.path.join(tmp, "py_p"), tokenizer="gpt2",
                                                         seq_len=1024, threads=threads, force=True)}
    print("Python package (%s), -j %d, %d runs each:" % (os.path.dirname(mkshards.__file__), threads, repeat))
    for name, fn in runs.items():
        ts, cs = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            c0 = resource.getrusage(resource.RUSAGE_SELF)
            try:
                fn()
            except mkshards.MkshardsError as e:  # an older package: .parquet refused
                print("  %-28s %s" % (name, str(e)[:100]))
                break
            c1 = resource.getrusage(resource.RUSAGE_SELF)
            ts.append(time.perf_counter() - t)
            cs.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
        if not ts:
            continue
        m = statistics.median(ts)
        n = lines.num_rows if "lines" in name else len(docs)
        print("  %-28s median %.3f s = %.0f docs/s, CPU median %.3f s (runs: %s)" %
              (name, m, n / m, statistics.median(cs), " ".join("%.3f" % x for x in ts)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default="build/tools/mkshards")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--row-group", type=int, default=4096)
    ap.add_argument("--hf", action="store_true")
    ap.add_argument("--python", action="store_true")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI builds (with --python / --hf)")
    a = ap.parse_args()
    import pyarrow as pa
    import pyarrow.parquet as pq
    vocab = os.path.join(a.shared, "vocab")
    env = dict(os.environ, MKS_VOCAB_DIR=vocab)
    zsts = sorted(glob.glob(os.path.join(a.shared, "corpus", "*.jsonl.zst")))
    if not zsts:
        sys.exit("bench_parquet: no %s/corpus/*.jsonl.zst" % a.shared)
    with tempfile.TemporaryDirectory(prefix="bench_parquet.") as tmp:
        docs = []
        for z in zsts:
            for line in subprocess.run(["zstd", "-dc", z], check=True, capture_output=True).stdout.splitlines():
                if line.strip():  # a lone surrogate escape: U+FFFD, as mkshards reads it
                    docs.append(re.sub("[\ud800-\udfff]", "\ufffd", json.loads(line)["text"]))
        plain = os.path.join(tmp, "corpus.jsonl")
        with open(plain, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
        parquet = os.path.join(tmp, "corpus.parquet")
        pq.write_table(pa.table({"text": pa.array(docs, pa.string())}), parquet, compression="snappy",
                       row_group_size=a.row_group)
        mb = os.path.getsize(plain) / 1e6
        print("corpus: %d documents, %.1f MB JSONL, %.1f MB Parquet (snappy, %d-row row groups, pyarrow %s)" %
              (len(docs), mb, os.path.getsize(parquet) / 1e6, a.row_group, pa.__version__))
        if a.python:
            py_sources(docs, parquet, tmp, a.threads, a.repeat)
        if a.no_cli:
            return
        times = {"jsonl": [], "parquet": []}
        outs = {"jsonl": os.path.join(tmp, "o_jsonl"), "parquet": os.path.join(tmp, "o_parquet")}
        for _ in range(a.repeat):
            times["jsonl"].append(run_build(a.mkshards, plain, outs["jsonl"], a.threads, env))
            times["parquet"].append(run_build(a.mkshards, parquet, outs["parquet"], a.threads, env))
        same = all(filecmp.cmp(p, os.path.join(outs["parquet"], os.path.basename(p)), shallow=False)
                   for p in glob.glob(os.path.join(outs["jsonl"], "*.mks")))
        wall = {k: [w for w, _, _ in v] for k, v in times.items()}
        cpu = {k: [c for _, c, _ in v] for k, v in times.items()}
        rss = {k: max(r for _, _, r in v) for k, v in times.items()}
        mj, mp = statistics.median(wall["jsonl"]), statistics.median(wall["parquet"])
        bj, bp = min(wall["jsonl"]), min(wall["parquet"])
        print("build -j %d, %d runs each, alternating (throughput: MB of the JSONL per s):" % (a.threads, a.repeat))
        for k, m, b in (("jsonl", mj, bj), ("parquet", mp, bp)):
            print("  .%-8s wall median %.3f s (%.1f MB/s), best %.3f s; CPU median %.3f s; peak RSS %.0f MiB" %
                  (k, m, mb / m, b, statistics.median(cpu[k]), rss[k]))
            print("    runs: %s" % " ".join("%.3f" % t for t in wall[k]))
        print("parquet/jsonl throughput: median %.3f, best %.3f (requirement >= 0.90); shards identical: %s" %
              (mj / mp, bj / bp, same))
        # each alternating pair ran under the same background load: its ratio is the steadier figure
        pw = sorted(j / p for j, p in zip(wall["jsonl"], wall["parquet"]))
        pc = sorted(j / p for j, p in zip(cpu["jsonl"], cpu["parquet"]))
        print("per pair (jsonl/parquet): wall median %.3f [%.3f .. %.3f], CPU median %.3f [%.3f .. %.3f]; "
              "load average %.1f" % (statistics.median(pw), pw[0], pw[-1], statistics.median(pc), pc[0], pc[-1],
                                     os.getloadavg()[0]))
        if a.hf:
            hw, n = hf_pipeline(parquet, vocab, tmp, 2)
            print("datasets.load_dataset + map(GPT2TokenizerFast, batched, num_proc=2) + save_to_disk: %.3f s "
                  "(%d rows); mkshards build -j %d from the .parquet: median %.3f s -> %.1fx faster "
                  "(requirement >= 5x)" % (hw, n, a.threads, mp, hw / mp))


if __name__ == "__main__":
    main()
