#!/usr/bin/env python3
"""HF tokenizer.json benchmark: `mkshards encode` vs HF `tokenizers`, 1 thread.

    python3 tools/bench/bench_hf.py [--mkshards build/tools/mkshards] [--shared ../shared]
                                    [--limit-mb 20] [--tokenizers llama3,qwen2] [--files A.json,B.json]
                                    [--rounds R] [--baseline OLD/mkshards]

For each tokenizer of SHARED/vocab/hf: HF tokenizers (RAYON_NUM_THREADS=1,
encode_special_tokens=True, add_special_tokens=False, the file's truncation and
padding off, one document at a time,
in-process, load excluded) against `mkshards encode -j 1` as a whole process
(load, read, encode, write ids included) on the same documents: the first
LIMIT MB of every corpus category, round-robin. Also the load time of the
tokenizer.json (`mkshards encode` of an empty input, best of 5) and HF's
Tokenizer.from_file. The ids of every document are compared with HF's
("ids equal N/M"; a document HF fails, e.g. MissingUnkId, counts as equal
when mkshards refuses it too). --rounds R measures HF and mkshards R times
(a line per round, then the median and range of the CPU ratio); --baseline
runs another mkshards build right after each mkshards run, on the same
input, for a paired old/new figure on a noisy machine.
Needs: pip install tokenizers; the zstd CLI.
"""
import argparse
import json
import os
import resource
import statistics
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
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--baseline", default="", help="another mkshards binary, run after each mkshards run")
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
            tk.no_truncation()  # a file's truncation / padding (MiniLM: 256) is not encode's: mkshards never cuts
            tk.no_padding()

            def hf_ids(d):
                try:
                    return tk.encode(d, add_special_tokens=False).ids
                except Exception:  # noqa: BLE001 - HF fails the text (MissingUnkId): mkshards must refuse it
                    return None

            def run(c, acc):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                p = subprocess.run(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                acc.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
                return p.returncode

            def cmd_of(binary, inp_path):
                return [binary, "encode", "-j", "1", "--tokenizer", path, "--ids-out", os.path.join(td, "ids"), inp_path]

            ratios, base_ratios = [], []
            for rnd in range(a.rounds):
                c0 = time.process_time()
                t0 = time.perf_counter()
                ref = [hf_ids(d) for d in docs]
                hf = time.perf_counter() - t0
                hf_cpu = time.process_time() - c0
                ms_cpu, base_cpu, walls = [], [], []
                for _ in range(3):
                    t0 = time.perf_counter()
                    rc = run(cmd_of(a.mkshards, inp), ms_cpu)
                    walls.append(time.perf_counter() - t0)
                    if rnd == 0 and len(ms_cpu) == 1:  # the ids of this build (its first run), against HF's
                        got = []
                        if rc == 0:
                            with open(os.path.join(td, "ids")) as f:
                                got = [json.loads(x) for x in f]
                    if a.baseline:
                        run(cmd_of(a.baseline, inp), base_cpu)
                ms = min(walls)
                if rnd == 0:
                    load_cpu = []
                    load = best(lambda: run(cmd_of(a.mkshards, empty), load_cpu), 5)
                    # `mkshards encode` skips a document the tokenizer refuses (no line): HF's ids of the
                    # documents it encodes, in order, against the lines; a refusal of a text HF fails is equal
                    ok = [r for r in ref if r is not None]
                    equal = sum(1 for x, y in zip(ok, got) if x == y)
                    if rc == 0 and len(got) == len(ok):
                        equal += len(ref) - len(ok)
                ratios.append(hf_cpu / min(ms_cpu))
                line = (f"{name:14} {nbytes / hf / 1e6:8.2f} {nbytes / ms / 1e6:14.2f} {hf / ms:6.1f} "
                        f"{ratios[-1]:9.1f} {load * 1e3:8.0f} {min(load_cpu) * 1e3:11.0f} {hf_load * 1e3:10.0f}")
                if a.baseline:
                    base_ratios.append(hf_cpu / min(base_cpu))
                    line += f"  baseline CPU ratio {base_ratios[-1]:.1f} ({min(base_cpu) * 1e3:.0f} -> {min(ms_cpu) * 1e3:.0f} ms)"
                if rnd == 0:
                    line += f"  ids equal {equal}/{len(ref)}"
                print(line, flush=True)
            if a.rounds > 1:
                summary = f"{name:14} CPU ratio median {statistics.median(ratios):.1f} [{min(ratios):.1f} .. {max(ratios):.1f}]"
                if a.baseline:
                    summary += (f", baseline {statistics.median(base_ratios):.1f} "
                                f"[{min(base_ratios):.1f} .. {max(base_ratios):.1f}]")
                print(summary, flush=True)

if __name__ == "__main__":
    main()
