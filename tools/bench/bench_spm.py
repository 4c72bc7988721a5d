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
cached under $TMPDIR), or `t5uni32k`: a 32000-piece Unigram trained here like
T5's (nmt_nfkc, dummy prefix; cached too). Unigram fixtures
(tests/data/tk_unigram, uni_*) by name as well:
    python3 tools/bench/bench_spm.py --models uni_nmt,uni_bf,t5uni32k
Needs: pip install sentencepiece; the zstd CLI.
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
    return out


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--limit-mb", type=float, default=8)
    ap.add_argument("--models", default="bpe_llama,bpe_nmt,llama32k")
    a = ap.parse_args()
    import sentencepiece as spm
    docs = docs_of(a.shared, a.limit_mb * 1e6)
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
                name if os.path.exists(name) else fixture)
            sp = spm.SentencePieceProcessor(model_file=path)
            t0, c0 = time.perf_counter(), time.process_time()
            ref = [sp.encode(d) for d in docs]
            t_sp, c_sp = time.perf_counter() - t0, time.process_time() - c0
            out = os.path.join(td, "ids.txt")
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([a.mkshards, "encode", "-t", path, "-j", "1", inp, "--ids-out", out], check=True)
            t_mk = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            c_mk = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            with open(out) as f:
                ours = [json.loads(line) for line in f]
            same = sum(x == y for x, y in zip(ours, ref))
            print(f"{name:10s} {sp.get_piece_size():6d} pieces: sentencepiece {nbytes / 1e6 / t_sp:6.2f} MB/s, "
                  f"mkshards encode -j 1 {nbytes / 1e6 / t_mk:6.2f} MB/s ({t_sp / t_mk:4.1f}x) wall; CPU time "
                  f"{nbytes / 1e6 / c_sp:6.2f} vs {nbytes / 1e6 / c_mk:6.2f} MB/s ({c_sp / c_mk:4.1f}x); "
                  f"ids equal on {same}/{len(docs)} documents")


if __name__ == "__main__":
    main()
