#!/usr/bin/env python3
"""bench_gzip.py - `mkshards build` from .jsonl.gz against the same data as
.jsonl (issue 29 item 1: within 1.15x the wall time at 2 threads).

The shared corpus (../shared/corpus/*.jsonl.zst) is decompressed once into a
temporary folder as one .jsonl and gzip-compressed (`gzip -6`, the default
of the tools that publish corpora; Python's gzip module if there is no gzip
CLI). Builds of both alternate (--repeat times each, so background load
hits both alike); the median wall time of each and their ratio are printed,
and the shards of the two builds are compared byte for byte. With --inflate,
also times a bare decompression of the .gz by the CLIs that are installed
(gzip, pigz -p1 = zlib, igzip = ISA-L), the figures behind the choice of
zlib in dataset/reader.c (docs/reader.md).

  python3 tools/bench/bench_gzip.py [--mkshards build/tools/mkshards]
      [--shared ../shared] [--threads 2] [--repeat 5] [--inflate]
"""
import argparse
import filecmp
import glob
import gzip
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_build(mks, inp, out, threads, env):
    """(wall s, CPU s of the build process: user + sys)"""
    shutil.rmtree(out, ignore_errors=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([mks, "build", "-t", "gpt2", "-L", "1024", "-j", str(threads), "-o", out, inp],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default="build/tools/mkshards")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--inflate", action="store_true")
    a = ap.parse_args()
    env = dict(os.environ, MKS_VOCAB_DIR=os.path.join(a.shared, "vocab"))
    zsts = sorted(glob.glob(os.path.join(a.shared, "corpus", "*.jsonl.zst")))
    if not zsts:
        sys.exit("bench_gzip: no %s/corpus/*.jsonl.zst" % a.shared)
    with tempfile.TemporaryDirectory(prefix="bench_gzip.") as tmp:
        plain = os.path.join(tmp, "corpus.jsonl")
        with open(plain, "wb") as f:
            for z in zsts:
                f.write(subprocess.run(["zstd", "-dc", z], check=True, capture_output=True).stdout)
        gz = plain + ".gz"
        if shutil.which("gzip"):
            with open(gz, "wb") as f:
                subprocess.run(["gzip", "-6", "-c", plain], check=True, stdout=f)
        else:
            with open(plain, "rb") as fi, gzip.open(gz, "wb", compresslevel=6) as fo:
                shutil.copyfileobj(fi, fo)
        mb = os.path.getsize(plain) / 1e6
        print("corpus: %.1f MB JSONL, %.1f MB gzip -6 (%d files of %s)" %
              (mb, os.path.getsize(gz) / 1e6, len(zsts), os.path.join(a.shared, "corpus")))
        if a.inflate:
            for cmd in (["gzip", "-dc"], ["pigz", "-p1", "-dc"], ["igzip", "-dc"]):
                if not shutil.which(cmd[0]):
                    continue
                best = min(_timed(cmd + [gz]) for _ in range(3))
                print("inflate only: %-14s %.3f s  %.0f MB/s" % (" ".join(cmd[:-1]), best, mb / best))
        times = {"jsonl": [], "gz": []}
        outs = {"jsonl": os.path.join(tmp, "o_jsonl"), "gz": os.path.join(tmp, "o_gz")}
        for _ in range(a.repeat):
            times["jsonl"].append(run_build(a.mkshards, plain, outs["jsonl"], a.threads, env))
            times["gz"].append(run_build(a.mkshards, gz, outs["gz"], a.threads, env))
        same = all(filecmp.cmp(p, os.path.join(outs["gz"], os.path.basename(p)), shallow=False)
                   for p in glob.glob(os.path.join(outs["jsonl"], "*.mks")))
        wall = {k: [w for w, _ in v] for k, v in times.items()}
        cpu = {k: [c for _, c in v] for k, v in times.items()}
        mj, mg = statistics.median(wall["jsonl"]), statistics.median(wall["gz"])
        bj, bg = min(wall["jsonl"]), min(wall["gz"])
        cj, cg = statistics.median(cpu["jsonl"]), statistics.median(cpu["gz"])
        print("build -j %d, %d runs each, alternating:" % (a.threads, a.repeat))
        print("  .jsonl    wall median %.3f s (%.1f MB/s), best %.3f s; CPU median %.3f s" % (mj, mb / mj, bj, cj))
        print("  .jsonl.gz wall median %.3f s (%.1f MB/s), best %.3f s; CPU median %.3f s" % (mg, mb / mg, bg, cg))
        print("  runs .jsonl: %s" % " ".join("%.3f" % t for t in wall["jsonl"]))
        print("  runs .gz:    %s" % " ".join("%.3f" % t for t in wall["gz"]))
        print("ratio gz/jsonl: wall median %.3f, wall best %.3f, CPU %.3f (requirement <= 1.15 wall); "
              "shards identical: %s" % (mg / mj, bg / bj, cg / cj, same))
        print("  (on a machine shared with other work the medians carry its load; the best runs and the "
              "CPU ratio do less so)")
        if not same:
            sys.exit(1)


def _timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
