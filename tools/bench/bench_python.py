"""Python package benchmark: mkshards vs tiktoken vs HF tokenizers, and shard-set iteration speed.

    pip install .                     # the mkshards package
    pip install tiktoken tokenizers   # peers (optional: missing ones are skipped); torch for the ShardDataset rows
    python3 tools/bench/bench_python.py [--encodings cl100k_base] [--quick] [--mkshards build/tools/mkshards]

Encoding (fastest of --repeat rounds, each timing every tokenizer once in turn, after one untimed pass that makes
CPython cache every document's UTF-8 form; wall and CPU seconds of the process; all figures from the same process
and the same documents, already decompressed in memory):
- mkshards ``Encoding.encode_ordinary_batch(docs, num_threads=N)``, the Python lists of ids included;
- tiktoken ``encode_ordinary_batch(docs, num_threads=N)`` with the same rank file, tiktoken's own pat_str/specials;
- HF tokenizers ``encode_batch_fast`` (or ``encode_batch``) on the ``tokenizer.json`` that ``mkshards tokenizer
  export`` writes, the lists of ids included; its 1-thread figure with TOKENIZERS_PARALLELISM=false;
- mkshards ``encode_to_numpy`` per document (1 thread) and ``encode_ordinary_batch_to_numpy`` (N threads).
N = 1 and all cores. ratio = peer seconds / mkshards seconds at the same thread count. Every peer's ids are
compared with mkshards' (documents that differ are counted).

Shard iteration: a shard set built with ``mkshards build -t cl100k_base -L 2048`` (uint32 ids, 4 bytes per
token on disk and in memory) from the corpus, read from the page cache on one core (after one warm-up pass):
ShardSet rows (numpy, zero-copy tokens), ShardSet.read in blocks, and with torch the map-style ShardDataset per
row and per token-budget micro-batch and the IterableDataset, each with llmtrain's full layout (int64
input_ids, labels, position_ids, doc_ids + bool loss_mask: 33 bytes written per token) and with
``fields=("input_ids", "labels")`` (16 bytes per token). GB/s = row tokens (2048 per row, padding included) x 4
bytes (the uint32 ids read) / CPU seconds of the process; the wall figure is what a busy machine gave.
Where the time goes (measured, 2 cores shared with other builds): writing the int64 tensors and creating five
torch tensors per row (~0.7 us each); the C fill itself is ~2 us per row (fill() reads each row's document
starts from the mapped metadata and writes one run per document).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load_corpus(shared, limit_bytes=None):
    docs, total = [], 0
    for cat in ("en-books", "multi", "code", "web"):
        p = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", f"{cat}.jsonl.zst")], capture_output=True,
                           check=True)
        for line in p.stdout.splitlines():
            t = json.loads(line)["text"]
            docs.append(t)
            total += len(t.encode())
    if limit_bytes:
        # a mixed prefix: every 4th document until the budget is reached
        out, n = [], 0
        for i in range(0, len(docs), 4):
            out.append(docs[i])
            n += len(docs[i].encode())
            if n >= limit_bytes:
                break
        return out, n
    return docs, total


def tiktoken_encoding(tiktoken, vocab_dir, name):
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(os.path.join(vocab_dir, f"{'gpt2' if name == 'gpt2' else name}.tiktoken"))
    saved = op.load_tiktoken_bpe, getattr(op, "data_gym_to_mergeable_bpe_ranks", None)
    op.load_tiktoken_bpe = lambda *a, **k: ranks
    op.data_gym_to_mergeable_bpe_ranks = lambda *a, **k: ranks
    try:
        spec = getattr(op, name)()
    finally:
        op.load_tiktoken_bpe = saved[0]
        if saved[1]:
            op.data_gym_to_mergeable_bpe_ranks = saved[1]
    return tiktoken.Encoding(name=name, pat_str=spec["pat_str"], mergeable_ranks=ranks,
                             special_tokens=spec["special_tokens"])


def timed(fn):
    """(wall seconds, CPU seconds of the whole process - every thread, e.g. tiktoken's and HF's pools -, result)"""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def ndiff(a, b):
    return sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))


def bench_encoding(args, name, docs, nbytes, nthr):
    """Every figure is the fastest of --repeat rounds; each round times every tokenizer once, in turn, so that
    load from other processes on a shared machine hits all of them alike."""
    import mkshards
    enc = mkshards.get_encoding(name)
    runs = {}  # key -> (call, threads, fn, reference ids or None)
    for th in sorted({1, nthr}):
        runs[("mk", th)] = ("mkshards encode_ordinary_batch", th,
                            (lambda th=th: enc.encode_ordinary_batch(docs, num_threads=th)))
    runs[("np", 1)] = ("mkshards encode_to_numpy (per doc)", 1,
                       lambda: [enc.encode_to_numpy(d, disallowed_special=()) for d in docs])
    runs[("np", nthr)] = ("mkshards ..._batch_to_numpy", nthr,
                          lambda: enc.encode_ordinary_batch_to_numpy(docs, num_threads=nthr))
    try:
        import tiktoken
    except ImportError:
        tiktoken = None
        log("bench: tiktoken not installed, skipped")
    if tiktoken:
        tt = tiktoken_encoding(tiktoken, args.vocab, name)
        for th in sorted({1, nthr}):
            runs[("tt", th)] = ("tiktoken encode_ordinary_batch", th,
                                (lambda th=th: tt.encode_ordinary_batch(docs, num_threads=th)))
    hf_dir = None
    if not args.no_hf:
        try:
            import tokenizers
        except ImportError:
            tokenizers = None
            log("bench: HF tokenizers not installed, skipped")
        mks = args.mkshards
        if tokenizers and not (mks and os.access(mks, os.X_OK)):
            log("bench: HF tokenizers skipped: no mkshards CLI to export tokenizer.json (--mkshards)")
        elif tokenizers:
            hf_dir = tempfile.mkdtemp(prefix="bench_python_hf.")
            tj = os.path.join(hf_dir, "tokenizer.json")
            subprocess.run([mks, "tokenizer", "export", "-t", name, "--out", tj], check=True,
                           env=dict(os.environ, MKS_VOCAB_DIR=args.vocab))
            hf = tokenizers.Tokenizer.from_file(tj)
            call = getattr(hf, "encode_batch_fast", hf.encode_batch)

            def hf_run(th, call=call):
                os.environ["TOKENIZERS_PARALLELISM"] = "false" if th == 1 else "true"
                return [e.ids for e in call(docs, add_special_tokens=False)]
            for th in sorted({1, nthr}):
                runs[("hf", th)] = (f"HF {call.__name__}", th, (lambda th=th: hf_run(th)))
    # warm-up, untimed: CPython caches a str's UTF-8 form on first use (PyUnicode_AsUTF8AndSize, which mkshards,
    # tiktoken and HF all call), so whichever tokenizer ran first would pay for converting 77 MB
    enc.encode_ordinary_batch_to_numpy(docs, num_threads=nthr)
    best, cpu, ids, diffs = {}, {}, {}, {}
    for rnd in range(args.repeat):
        for key, (call, th, fn) in runs.items():
            log(f"bench: {name}: round {rnd + 1}/{args.repeat}: {call}, {th} thread(s) ...")
            t, c, out = timed(fn)
            if key not in best or t < best[key]:
                best[key], cpu[key] = t, c
            if key == ("mk", 1):
                ids = out
            elif key[0] in ("tt", "hf") and key not in diffs:
                diffs[key] = ndiff(out, ids)
            elif key == ("np", nthr) and key not in diffs:
                a, off = out
                diffs[key] = sum(1 for i in range(len(ids)) if a[off[i]:off[i + 1]].tolist() != ids[i])
            del out
    if hf_dir:
        shutil.rmtree(hf_dir, ignore_errors=True)
    rows = []
    for key, (call, th, _) in runs.items():
        peer = key[0] in ("tt", "hf")
        ratio = best[key] / best[("mk", th)] if peer else None
        cratio = cpu[key] / cpu[("mk", th)] if peer else None
        rows.append((name, call, th, best[key], cpu[key], ratio, cratio, diffs.get(key, 0)))
    return rows, sum(map(len, ids))


def build_shards(args, tmp):
    mks = args.mkshards
    if not (mks and os.access(mks, os.X_OK)):
        return None
    out = os.path.join(tmp, "shards")
    ins = [os.path.join(args.shared, "corpus", f"{c}.jsonl.zst") for c in ("en-books", "multi", "code", "web")]
    log("bench: building a cl100k_base shard set (L=2048) from the corpus ...")
    subprocess.run([mks, "build", "-q", "-t", "cl100k_base", "-L", str(args.seq_len), "-o", out, *ins], check=True,
                   env=dict(os.environ, MKS_VOCAB_DIR=args.vocab))
    return out


def bench_shards(args, d):
    import numpy as np

    import mkshards
    ss = mkshards.ShardSet(d)
    n, L = ss.rows["train"], ss.row_len
    res = []

    def gbps(rows_done, dt):
        return rows_done * L * 4 / dt / 1e9

    def run(label, fn, rows_per_pass):
        # CPU time of this (single-threaded) process: what one core delivers, also on a shared machine
        fn()  # warm-up: page cache and mappings
        t0, c0, passes = time.perf_counter(), time.process_time(), 0
        while True:
            fn()
            passes += 1
            dt = time.perf_counter() - t0
            if dt >= args.min_seconds:
                break
        cpu = time.process_time() - c0
        res.append((label, gbps(rows_per_pass * passes, cpu), rows_per_pass * passes / cpu, gbps(rows_per_pass * passes, dt)))

    def rows_numpy():
        s = 0
        for i in range(n):
            s += int(ss[i]["tokens"][0])
        return s
    run("ShardSet[i] (numpy rows, zero-copy tokens)", rows_numpy, n)

    def blocks():
        for a in range(0, n, 64):
            ss.read(np.arange(a, min(n, a + 64)))
    run("ShardSet.read, blocks of 64 rows", blocks, n)
    try:
        import torch  # noqa: F401

        import mkshards.torch as mt
    except ImportError:
        log("bench: torch not installed: ShardDataset rows skipped")
        return res, ss
    ds = mt.ShardDataset(d, verify=False)

    def per_row():
        for i in range(n):
            ds[i]
    run("ShardDataset[i] (torch, per row)", per_row, n)
    sampler = mt.TokenBudgetBatchSampler(ds, L, token_budget=16 * L, batch_tokens=64 * L, seed=1337)
    rows_s = sum(map(len, sampler))

    def sampled():
        for rows in sampler:
            ds[rows]
    run("ShardDataset[rows] (TokenBudgetBatchSampler, 16 rows)", sampled, rows_s)
    it = mt.ShardIterableDataset(d, verify=False, shuffle=True)

    def iterable():
        for _ in it:
            pass
    run("ShardIterableDataset (shuffled, per row)", iterable, n)
    # the same with the two tensors a model without document masking needs
    two = ("input_ids", "labels")
    ds2 = mt.ShardDataset(d, verify=False, fields=two)

    def per_row2():
        for i in range(n):
            ds2[i]
    run("ShardDataset[i], fields=input_ids+labels", per_row2, n)

    def sampled2():
        for rows in sampler:
            ds2[rows]
    run("ShardDataset[rows] (16 rows), fields=input_ids+labels", sampled2, rows_s)
    it2 = mt.ShardIterableDataset(d, verify=False, shuffle=True, fields=two)

    def iterable2():
        for _ in it2:
            pass
    run("ShardIterableDataset (per row), fields=input_ids+labels", iterable2, n)
    return res, ss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"),
                    help="CLI for tokenizer export (HF) and the shard build")
    ap.add_argument("--encodings", default="cl100k_base")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="'all threads' (default: all cores)")
    ap.add_argument("--quick", action="store_true", help="a 20 MB mixed sample instead of the whole corpus")
    ap.add_argument("--repeat", type=int, default=1, help="rounds (every tokenizer once per round); the fastest counts")
    ap.add_argument("--no-hf", action="store_true")
    ap.add_argument("--no-shards", action="store_true")
    ap.add_argument("--only-shards", action="store_true", help="shard iteration only (no encoding figures)")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--min-seconds", type=float, default=2.0, help="time each shard iteration for at least this")
    args = ap.parse_args()
    args.vocab = os.path.join(args.shared, "vocab")
    os.environ.setdefault("MKS_VOCAB_DIR", args.vocab)
    import mkshards
    log(f"bench: mkshards {mkshards.__version__} from {os.path.dirname(mkshards.__file__)}")
    docs, nbytes = load_corpus(args.shared, 1e6 if args.only_shards else 20e6 if args.quick else None)
    nthr = max(1, args.threads)
    log(f"bench: {len(docs)} documents, {nbytes / 1e6:.1f} MB of text, all threads = {nthr}")
    rows = []
    ntoks = {}
    for name in ([] if args.only_shards else args.encodings.split(",")):
        r, ntoks[name] = bench_encoding(args, name, docs, nbytes, nthr)
        rows += r
    if rows:
        print(f"\nEncoding {len(docs)} documents, {nbytes / 1e6:.1f} MB of UTF-8 text (Python lists of ids included "
              f"unless noted), fastest of {args.repeat} round(s). ratio = peer wall s / mkshards wall s at the same "
              f"thread count; cpu ratio = the same with the process's CPU seconds (all threads).\n")
        print(f"| {'encoding':<12} | {'call':<36} | {'threads':>7} | {'seconds':>8} | {'cpu s':>7} | {'MB/s':>7} "
              f"| {'ratio':>7} | {'cpu ratio':>9} | {'docs != mkshards':>16} |")
        print(f"|{'-' * 14}|{'-' * 38}|{'-' * 9}:|{'-' * 9}:|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 10}:|"
              f"{'-' * 17}:|")
    for name, call, th, t, c, ratio, cratio, nd in rows:
        rs = f"{ratio:.2f}x" if ratio is not None else ""
        cs = f"{cratio:.2f}x" if cratio is not None else ""
        print(f"| {name:<12} | {call:<36} | {th:>7} | {t:>8.2f} | {c:>7.2f} | {nbytes / t / 1e6:>7.1f} | {rs:>7} "
              f"| {cs:>9} | {nd:>16} |")
    if not args.no_shards:
        tmp = tempfile.mkdtemp(prefix="bench_python.")
        try:
            d = build_shards(args, tmp)
            if d is None:
                log("bench: no mkshards CLI: shard iteration skipped (--mkshards)")
            else:
                res, ss = bench_shards(args, d)
                print(f"\nShard iteration, one core, page cache: {ss.rows['train']} rows x {ss.row_len} "
                      f"(cl100k_base, uint32). GB/s = tokens x 4 bytes / CPU seconds of the process (wall: on "
                      f"a busy machine).\n")
                print(f"| {'reader':<54} | {'GB/s':>6} | {'rows/s':>9} | {'wall GB/s':>9} |")
                print(f"|{'-' * 56}|{'-' * 7}:|{'-' * 10}:|{'-' * 10}:|")
                for label, g, rps, gw in res:
                    print(f"| {label:<54} | {g:>6.2f} | {rps:>9.0f} | {gw:>9.2f} |")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
