#!/usr/bin/env python3
"""SentencePiece .model benchmark: `mkshards encode` vs `sentencepiece`, 1 thread.

    python3 tools/bench/bench_spm.py [--mkshards build/tools/mkshards] [--shared ../shared]
                                     [--limit-mb 8] [--models bpe_llama,bpe_nmt,llama32k]

For each model: sentencepiece's SentencePieceProcessor.encode (in-process,
one document at a time, load excluded) against `mkshards encode -j 1` as a
whole process (load, read, encode, write ids included) on the same
documents: the first LIMIT MB of every corpus category, round-robin; the
ids are compared too. Wall and CPU time (the CPU ratio is the one to trust on
a loaded machine). Models: the fixtures of tests/data/tk_spm by name, a
path to any .model, `llama32k`: a 32000-piece BPE trained here like
Llama 2's (identity, byte fallback, split digits, whitespace-only pieces;
cached under $TMPDIR), `t5uni32k`: a 32000-piece Unigram trained here like
T5's (nmt_nfkc, dummy prefix; cached too), or `uni250k`: an mT5/XLM-R-sized
Unigram (vocab_size 250000 asked, hard_vocab_limit off: as many pieces as
the corpus gives, on the documents after the measured ones; cached too,
some minutes to train). Unigram fixtures (tests/data/tk_unigram, uni_*) by
name as well:
    python3 tools/bench/bench_spm.py --models uni_nmt,t5uni32k,uni250k --per-category
Each model also gets its load time (`mkshards encode` of an empty input,
best of 5: wall and CPU) and, from `--stats`, the CPU time of the encode
calls alone, the figure comparable to sentencepiece's in-process one
(`in-process` column); --per-category repeats both per corpus category.
Needs: pip install sentencepiece; the zstd CLI.
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CATS = ["en-books", "multi", "code", "web"]


def docs_of(shared, limit):
    per = {}
    for cat in CATS:
        raw = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", cat + ".jsonl.zst")], check=True,
                             stdout=subprocess.PIPE).stdout
        per[cat], total = [], 0
        for line in raw.splitlines():
            t = json.loads(line)["text"]
            per[cat].append(t)
            total += len(t.encode())
            if total >= limit / len(CATS):
                break
    out = []
    for k in range(max(len(v) for v in per.values())):  # round-robin
        out += [per[c][k] for c in CATS if k < len(per[c])]
    return out, per


def llama32k(shared, unigram=False):
    import sentencepiece as spm
    path = os.path.join(tempfile.gettempdir(), "bench_spm_t5uni32k.model" if unigram else "bench_spm_llama32k.model")
    if os.path.exists(path):
        return path
    txt = os.path.join(tempfile.gettempdir(), "bench_spm_train.txt")
    with open(txt, "w") as f:
        for cat in CATS:
            raw = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", cat + ".jsonl.zst")], check=True,
                                 stdout=subprocess.PIPE).stdout.decode().splitlines()
            for line in raw[-400:]:  # the last documents: not the measured ones
                for s in json.loads(line)["text"][:200000].splitlines():
                    if s.strip():
                        f.write(s[:4000] + "\n")
    if unigram:  # T5's options: the defaults (nmt_nfkc, dummy prefix, remove extra whitespace)
        spm.SentencePieceTrainer.train(input=txt, model_prefix=path[:-6], model_type="unigram", vocab_size=32000,
                                       character_coverage=0.9995, input_sentence_size=100000, num_threads=2,
                                       minloglevel=2)
        os.remove(txt)
        return path
    spm.SentencePieceTrainer.train(input=txt, model_prefix=path[:-6], model_type="bpe", vocab_size=32000,
                                   normalization_rule_name="identity", byte_fallback=True, split_digits=True,
                                   allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
                                   character_coverage=0.9995, input_sentence_size=300000, num_threads=2,
                                   minloglevel=2)
    os.remove(txt)
    return path


def uni250k(shared):
    """An mT5/XLM-R-sized Unigram (250000 pieces asked) trained on the corpus
    past the first 2 MB of each category (the measured documents)."""
    import sentencepiece as spm
    path = os.path.join(tempfile.gettempdir(), "bench_spm_uni250k.model")
    if os.path.exists(path):
        return path
    txt = os.path.join(tempfile.gettempdir(), "bench_spm_train250k.txt")
    with open(txt, "w") as f:
        for cat in CATS:
            raw = subprocess.run(["zstd", "-dc", os.path.join(shared, "corpus", cat + ".jsonl.zst")], check=True,
                                 stdout=subprocess.PIPE).stdout.decode().splitlines()
            skip = 0
            for line in raw:
                t = json.loads(line)["text"]
                if skip < 2e6:
                    skip += len(t.encode())
                    continue
                for s in t.splitlines():
                    if s.strip():
                        f.write(s[:4000] + "\n")
    spm.SentencePieceTrainer.train(input=txt, model_prefix=path[:-6], model_type="unigram", vocab_size=250000,
                                   hard_vocab_limit=False, character_coverage=0.9995, input_sentence_size=600000,
                                   shuffle_input_sentence=True, seed_sentencepiece_size=3000000, num_threads=2,
                                   minloglevel=2)
    os.remove(txt)
    return path


def run_mkshards(mks, path, inp, out):
    """(wall s, CPU s of the process, CPU s of the encode calls alone) of one
    `mkshards encode -j 1 --stats`."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([mks, "encode", "-t", path, "-j", "1", "--stats", inp, "--ids-out", out], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"encoding alone ([0-9.]+) s", p.stderr)
    return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--limit-mb", type=float, default=8)
    ap.add_argument("--models", default="bpe_llama,bpe_nmt,llama32k")
    ap.add_argument("--per-category", action="store_true", help="also the in-process ratio per corpus category")
    a = ap.parse_args()
    import sentencepiece as spm
    docs, docs_of_cat = docs_of(a.shared, a.limit_mb * 1e6)
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"{len(docs)} documents, {nbytes / 1e6:.1f} MB, 1 thread; sentencepiece {spm.__version__}")
    with tempfile.TemporaryDirectory() as td:
        inp = os.path.join(td, "in.jsonl")
        with open(inp, "w") as f:
            for d in docs:
                f.write(json.dumps({"text": d}) + "\n")
        for name in a.models.split(","):
            fixture = os.path.join(ROOT, "tests", "data", "tk_unigram" if name.startswith("uni_") else "tk_spm",
                                   name + ".model")
            path = llama32k(a.shared, name == "t5uni32k") if name in ("llama32k", "t5uni32k") else (
                uni250k(a.shared) if name == "uni250k" else name if os.path.exists(name) else fixture)
            sp = spm.SentencePieceProcessor(model_file=path)
            t0, c0 = time.perf_counter(), time.process_time()
            ref = [sp.encode(d) for d in docs]
            t_sp, c_sp = time.perf_counter() - t0, time.process_time() - c0
            out = os.path.join(td, "ids.txt")
            t_mk, c_mk, e_mk = run_mkshards(a.mkshards, path, inp, out)
            with open(out) as f:
                ours = [json.loads(line) for line in f]
            same = sum(x == y for x, y in zip(ours, ref))
            empty = os.path.join(td, "empty.jsonl")
            open(empty, "w").close()
            loads = [run_mkshards(a.mkshards, path, empty, os.devnull) for _ in range(5)]
            print(f"{name:10s} {sp.get_piece_size():6d} pieces: sentencepiece {nbytes / 1e6 / t_sp:6.2f} MB/s, "
                  f"mkshards encode -j 1 {nbytes / 1e6 / t_mk:6.2f} MB/s ({t_sp / t_mk:4.1f}x) wall; CPU time "
                  f"{nbytes / 1e6 / c_sp:6.2f} vs {nbytes / 1e6 / c_mk:6.2f} MB/s ({c_sp / c_mk:4.1f}x); in-process "
                  f"{nbytes / 1e6 / e_mk:6.2f} MB/s ({c_sp / e_mk:4.1f}x); load {min(w for w, _, _ in loads) * 1e3:.0f} ms "
                  f"wall, {min(c for _, c, _ in loads) * 1e3:.0f} ms CPU; ids equal on {same}/{len(docs)} documents",
                  flush=True)
            if not a.per_category:
                continue
            for cat in CATS:
                sub = docs_of_cat[cat]
                nb = sum(len(d.encode()) for d in sub)
                c0 = time.process_time()
                for d in sub:
                    sp.encode(d)
                c_sp = time.process_time() - c0
                ci = os.path.join(td, cat + ".jsonl")
                with open(ci, "w") as f:
                    for d in sub:
                        f.write(json.dumps({"text": d}) + "\n")
                _, _, e_mk = run_mkshards(a.mkshards, path, ci, os.devnull)
                print(f"  {cat:9s} {nb / 1e6:5.2f} MB: sentencepiece {nb / 1e6 / c_sp:6.2f} MB/s CPU, mkshards "
                      f"in-process {nb / 1e6 / e_mk:6.2f} MB/s ({c_sp / e_mk:4.1f}x)", flush=True)

if __name__ == "__main__":
    main()
