#!/usr/bin/env python3
"""Encoding throughput benchmark: `mkshards encode` vs tiktoken vs HF tokenizers.

    python3 tools/bench/bench_encode.py [--quick] [--mkshards build/tools/mkshards]

Needs: a built mkshards, `pip install tiktoken tokenizers`, the zstd CLI, and the
shared data (../shared/corpus/*.jsonl.zst and ../shared/vocab/*.tiktoken).
See tools/bench/README.md for what is measured and how.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]
MIB = 1 << 20


# ----------------------------------------------------------------- helpers
def log(*a):
    print(*a, file=sys.stderr, flush=True)


def read_corpus(corpus_dir, limit_bytes):
    """Decompress the corpus with the zstd CLI; return (docs, files used)."""
    files = sorted(glob.glob(os.path.join(corpus_dir, "*.jsonl.zst")))
    if not files:
        sys.exit(f"bench: no *.jsonl.zst in {corpus_dir}")
    docs, total = [], 0
    for f in files:
        out = subprocess.run(["zstd", "-dc", f], check=True, stdout=subprocess.PIPE).stdout
        for line in out.splitlines():
            if not line.strip():
                continue
            t = json.loads(line)["text"]
            docs.append(t)
            total += len(t.encode("utf-8"))
            if limit_bytes and total >= limit_bytes:
                return docs, files
    return docs, files


def tiktoken_encoding(vocab_dir, name):
    """tiktoken.Encoding from the SAME rank file, with tiktoken's own pat_str and specials.

    tiktoken_ext.openai_public's constructors would download the rank files; we
    point its loaders at the shared copies instead, so pat_str and special
    tokens are exactly the ones tiktoken uses for `name`."""
    import tiktoken
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe

    path = os.path.join(vocab_dir, f"{name}.tiktoken")
    ranks = load_tiktoken_bpe(path)
    op.load_tiktoken_bpe = lambda *a, **k: ranks
    op.data_gym_to_mergeable_bpe_ranks = lambda *a, **k: ranks
    ctor = getattr(op, name)
    spec = ctor()
    return tiktoken.Encoding(name=f"{name}-shared", pat_str=spec["pat_str"],
                             mergeable_ranks=spec["mergeable_ranks"], special_tokens=spec["special_tokens"])


def run_ours(mks, vocab_dir, name, inputs, threads, ids_out, extra=(), encode_time=False):
    """Wall seconds of one `mkshards encode` process; with encode_time, also the
    seconds it spent in the encode calls alone (--stats: CPU time of the
    encoding thread at 1 thread, so reading and writing are left out)."""
    cmd = [mks, "encode", "--tokenizer", os.path.join(vocab_dir, f"{name}.tiktoken"), "--threads", str(threads),
           "--ids-out", ids_out, *extra, *(["--stats"] if encode_time else []), *inputs]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[:500]}")
    if not encode_time:
        return dt
    m = re.search(r"encoding alone ([0-9.]+) s", p.stderr)
    if not m:
        raise RuntimeError(f"no 'encoding alone' in the --stats line of {' '.join(cmd)}: {p.stderr.strip()[:300]}")
    return dt, float(m.group(1))


def count_mismatches(ids_path, reference):
    """Docs whose ids (one JSON array per line in ids_path) differ from reference[i]."""
    bad = n = 0
    with open(ids_path) as f:
        for i, line in enumerate(f):
            n += 1
            if i >= len(reference) or json.loads(line) != reference[i]:
                bad += 1
    return bad + max(0, len(reference) - n)


def fmt_rate(nbytes, secs):
    return f"{nbytes / secs / 1e6:8.2f}" if secs and secs > 0 else "     n/a"


# ------------------------------------------------------------- pathological
PATHO_TIKTOKEN = r"""
import sys, time, json
sys.path.insert(0, {bench_dir!r})
from bench_encode import tiktoken_encoding
enc = tiktoken_encoding({vocab!r}, {name!r})
text = open({path!r}, encoding="utf-8").read()
t0 = time.perf_counter()
enc.encode_ordinary(text)
print(time.perf_counter() - t0)
"""


def pathological_inputs(tmp):
    import random
    r = random.Random(1234)
    cases = {
        "one letter repeated": "a" * MIB,
        "random ASCII letters": "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(MIB)),
        "spaces": " " * MIB,
        "a line of digits": "".join(r.choice("0123456789") for _ in range(MIB)),
    }
    paths = {}
    for i, (label, text) in enumerate(cases.items()):
        p = os.path.join(tmp, f"patho{i}.txt")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        paths[label] = p
    return paths


# -------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.normpath(os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--quick", action="store_true", help="use only the first 20 MB of text")
    ap.add_argument("--encodings", default=",".join(ENCODINGS))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="'all threads' (default: all cores)")
    ap.add_argument("--no-hf", action="store_true", help="skip HF tokenizers")
    ap.add_argument("--no-patho", action="store_true", help="skip the pathological inputs")
    ap.add_argument("--timeout", type=float, default=60.0, help="tiktoken guard on pathological inputs (s)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of mkshards and of tiktoken per figure; the fastest counts (HF: one run)")
    args = ap.parse_args()

    mks = os.path.abspath(args.mkshards)
    if not os.access(mks, os.X_OK):
        sys.exit(f"bench: {mks} not found: build first (make build) or pass --mkshards")
    vocab = os.path.join(args.shared, "vocab")
    corpus = os.path.join(args.shared, "corpus")
    encodings = [e for e in args.encodings.split(",") if e]
    nthr = max(1, args.threads)
    reps = max(1, args.repeat)

    import tiktoken
    try:
        import tokenizers
    except ImportError:
        tokenizers = None

    limit = 20_000_000 if args.quick else 0
    log(f"bench: reading corpus from {corpus}{' (first 20 MB)' if args.quick else ''} ...")
    docs, files = read_corpus(corpus, limit)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    log(f"bench: {len(docs)} docs, {nbytes / 1e6:.1f} MB of text")

    tmp = tempfile.mkdtemp(prefix="mks_bench.")
    inputs = files
    if args.quick:  # ours reads the same subset, as a zstd-compressed JSONL
        sub = os.path.join(tmp, "quick.jsonl")
        with open(sub, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
        subprocess.run(["zstd", "-q", "-3", "-f", "--rm", sub], check=True)
        inputs = [sub + ".zst"]

    rows, notes = [], []
    normal_per_byte, start = {}, {}
    empty = os.path.join(tmp, "empty.txt")
    open(empty, "w").close()
    for name in encodings:
        log(f"bench: {name}: tiktoken ...")
        enc = tiktoken_encoding(vocab, name)
        tt1 = ttn = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            ref = enc.encode_ordinary_batch(docs, num_threads=1)
            tt1 = min(tt1, time.perf_counter() - t0)
            t0 = time.perf_counter()
            ref_n = enc.encode_ordinary_batch(docs, num_threads=nthr)
            ttn = min(ttn, time.perf_counter() - t0)
        if ref_n != ref:
            notes.append(f"{name}: tiktoken 1-thread and {nthr}-thread outputs differ")
        del ref_n
        ntok = sum(len(x) for x in ref)

        log(f"bench: {name}: mkshards encode ...")
        ids1 = os.path.join(tmp, f"{name}.1.ids")
        idsn = os.path.join(tmp, f"{name}.n.ids")
        runs1 = [run_ours(mks, vocab, name, inputs, 1, ids1, encode_time=True) for _ in range(reps)]
        o1 = min(r[0] for r in runs1)
        on = min(run_ours(mks, vocab, name, inputs, nthr, idsn) for _ in range(reps))
        start[name] = min(run_ours(mks, vocab, name, [empty], 1, os.devnull) for _ in range(3))
        bad1 = count_mismatches(ids1, ref)
        badn = count_mismatches(idsn, ref)
        os.remove(ids1)
        os.remove(idsn)
        # per byte of normal text, both ways: the process minus its start and
        # vocab load (as for the pathological inputs), and the encode calls alone
        normal_per_byte[name] = (max(1e-9, o1 - start[name]) / nbytes, min(r[1] for r in runs1) / nbytes)

        hf1 = hfn = None
        hfbad = None
        if tokenizers is not None and not args.no_hf:
            tj = os.path.join(tmp, f"{name}.tokenizer.json")
            p = subprocess.run([mks, "tokenizer", "export", "--tokenizer", os.path.join(vocab, f"{name}.tiktoken"),
                                "--out", tj], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0 or not os.path.exists(tj):
                notes.append(f"{name}: HF skipped: `mkshards tokenizer export` failed: {p.stdout.strip()[:200]}")
            else:
                log(f"bench: {name}: HF tokenizers ...")
                try:
                    tk = tokenizers.Tokenizer.from_file(tj)
                    batch = getattr(tk, "encode_batch_fast", tk.encode_batch)
                    os.environ["TOKENIZERS_PARALLELISM"] = "false"
                    t0 = time.perf_counter()
                    out = batch(docs, add_special_tokens=False)
                    hf1 = time.perf_counter() - t0
                    del out
                    os.environ["TOKENIZERS_PARALLELISM"] = "true"
                    t0 = time.perf_counter()
                    out = batch(docs, add_special_tokens=False)
                    hfn = time.perf_counter() - t0
                    hfbad = sum(1 for e, r in zip(out, ref) if e.ids != r)
                    del out
                except Exception as ex:  # noqa: BLE001 - report and go on
                    notes.append(f"{name}: HF failed: {ex}")
                    hf1 = hfn = None
        else:
            notes.append(f"{name}: HF skipped ({'--no-hf' if args.no_hf else 'pip install tokenizers'})")
        del ref

        rows.append((name, "mkshards", 1, o1, bad1, ntok))
        rows.append((name, "mkshards", nthr, on, badn, ntok))
        rows.append((name, "tiktoken", 1, tt1, 0, ntok))
        rows.append((name, "tiktoken", nthr, ttn, 0, ntok))
        if hf1 is not None:
            rows.append((name, "hf-tokenizers", 1, hf1, hfbad, ntok))
            rows.append((name, "hf-tokenizers", nthr, hfn, hfbad, ntok))

    # ---------------------------------------------------------- report
    print()
    print(f"Corpus: {len(docs)} docs, {nbytes / 1e6:.1f} MB of UTF-8 text"
          f"{' (--quick: first 20 MB)' if args.quick else ''}; {nthr} threads = all cores of this machine.")
    print("mkshards: whole process (start, vocab load, zstd+JSON read, encode, write ids);"
          " peers: encode calls only, docs already in memory.")
    print(f"Each mkshards and tiktoken figure is the fastest of {reps} runs (HF tokenizers: one run).")
    print()
    hdr = f"| {'encoding':<12} | {'tokenizer':<14} | {'threads':>7} | {'seconds':>8} | {'MB/s':>8} | {'ours/peer':>9} | {'docs != tiktoken':>16} |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    ours = {(r[0], r[2]): r[3] for r in rows if r[1] == "mkshards"}
    for name, impl, thr, secs, bad, ntok in rows:
        ratio = "" if impl == "mkshards" else f"{secs / ours[(name, thr)]:.2f}x"
        print(f"| {name:<12} | {impl:<14} | {thr:>7} | {secs:>8.2f} | {fmt_rate(nbytes, secs)} | {ratio:>9} | "
              f"{('' if bad is None else str(bad)):>16} |")
    print()
    print("ours/peer > 1 means mkshards is faster (peer seconds / mkshards seconds, same thread count).")

    if not args.no_patho:
        log("bench: pathological inputs ...")
        paths = pathological_inputs(tmp)
        print()
        print(f"Pathological inputs (1 MiB each, one document, 1 thread; tiktoken capped at {args.timeout:.0f}s):")
        print()
        hdr = (f"| {'input':<22} | {'encoding':<12} | {'ours encode s/MiB':>17} | {'ours process s/MiB':>18} | "
               f"{'tiktoken s/MiB':>14} | {'vs normal, encode':>17} | {'vs normal, process':>18} |")
        print(hdr)
        print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
        bench_dir = os.path.dirname(os.path.abspath(__file__))
        for name in encodings:
            base = start.get(name)
            if base is None:
                base = min(run_ours(mks, vocab, name, [empty], 1, os.devnull) for _ in range(3))
            for label, p in paths.items():
                runs = [run_ours(mks, vocab, name, [p], 1, os.devnull, encode_time=True) for _ in range(reps)]
                ours_s = max(1e-6, min(r[0] for r in runs) - base)
                ours_enc = max(1e-6, min(r[1] for r in runs))
                code = PATHO_TIKTOKEN.format(bench_dir=bench_dir, vocab=vocab, name=name, path=p)
                try:
                    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                         timeout=args.timeout)
                    if out.returncode == 0:
                        tk_s = f"{float(out.stdout.strip()):.3f}"
                    else:
                        tk_s = "crashed"
                        last = (out.stderr.strip().splitlines() or ["?"])[-1]
                        notes.append(f"tiktoken crashed on '{label}' ({name}): {last[:160]}")
                except subprocess.TimeoutExpired:
                    tk_s = f">{args.timeout:.0f}s"
                if name in normal_per_byte:
                    proc_n, enc_n = normal_per_byte[name]
                    rel_enc = f"{ours_enc / (enc_n * MIB):.2f}x"
                    rel_proc = f"{ours_s / (proc_n * MIB):.2f}x"
                else:
                    rel_enc = rel_proc = "n/a"
                print(f"| {label:<22} | {name:<12} | {ours_enc:>17.4f} | {ours_s:>18.4f} | {tk_s:>14} | "
                      f"{rel_enc:>17} | {rel_proc:>18} |")
        print()
        print("ours encode s/MiB: time in the encode calls alone (--stats, CPU time of the encoding thread);"
              " ours process s/MiB: the whole `mkshards encode` run minus an empty-input run (process start,"
              " vocab load). 'vs normal' divides each by the same measure per MiB of the corpus at 1 thread."
              " tiktoken s/MiB is its encode call alone.")
        for name in encodings:
            if name in normal_per_byte:
                proc_n, enc_n = normal_per_byte[name]
                print(f"normal text, {name}: encode {enc_n * MIB:.4f} s/MiB, process {proc_n * MIB:.4f} s/MiB")

    for n in notes:
        print(f"note: {n}")
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
