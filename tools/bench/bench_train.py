#!/usr/bin/env python3
"""bench_train.py - BPE vocabulary training: mkshards vs HF tokenizers vs sentencepiece.

Trains a --vocab-size vocabulary on the corpus (every --holdout-every'th
document is held out), with the same pre-tokenizer pattern, special tokens
and thread count, and prints for each trainer: wall time, peak RSS of the
training process, and the compression (UTF-8 bytes per token) it reaches on
the held-out documents. It also checks that the tokenizer.json we write loads
in HF tokenizers and gives the same ids as our encoder.

usage: python3 tools/bench/bench_train.py [--mkshards build/tools/mkshards]
         [--corpus ../shared/corpus] [--vocab-size 32768] [--threads 2]
         [--skip-spm] [--skip-hf] [--work /tmp/bench_train]

Needs: pip install tokenizers sentencepiece zstandard
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import time

PATTERNS = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
}


def run_measured(cmd, env=None, stdin=None):
    """Run cmd; return (wall seconds, peak RSS MiB, returncode)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdin=stdin)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    rc = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_maxrss / 1024.0, rc


def load_docs(corpus):
    import zstandard
    docs = []
    for path in sorted(glob.glob(os.path.join(corpus, "*.jsonl.zst"))):
        with open(path, "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        for line in data.decode("utf-8").splitlines():
            if line.strip():
                docs.append(json.loads(line)["text"])
    return docs


# ---------------------------------------------------------------- children
def child_hf(args):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS[args.pattern]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = args.special or []
    tr = trainers.BpeTrainer(vocab_size=args.vocab_size, special_tokens=specials, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=0)

    def it():
        with open(args.train_jsonl, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)["text"]
    tok.train_from_iterator(it(), trainer=tr)
    tok.save(args.out)


def child_spm(args):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=args.train_txt, model_prefix=args.out, model_type="bpe", vocab_size=args.vocab_size,
        num_threads=args.threads, byte_fallback=True, character_coverage=0.9995,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=False,
        user_defined_symbols=args.special or [], max_sentence_length=1 << 16, input_sentence_size=0,
        train_extremely_large_corpus=False, minloglevel=2)


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkshards", default="build/tools/mkshards")
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "../../../shared/corpus"))
    ap.add_argument("--vocab-size", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--pattern", default="o200k", choices=sorted(PATTERNS))
    ap.add_argument("--special", action="append")
    ap.add_argument("--holdout-every", type=int, default=20)
    ap.add_argument("--work", default="/tmp/bench_train")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-spm", action="store_true")
    ap.add_argument("--child", choices=["hf", "spm"])
    ap.add_argument("--train-jsonl")
    ap.add_argument("--train-txt")
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.special is None:
        args.special = ["<|endoftext|>"]
    if args.child == "hf":
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)
        return child_hf(args)
    if args.child == "spm":
        return child_spm(args)

    os.makedirs(args.work, exist_ok=True)
    docs = load_docs(args.corpus)
    train = [d for i, d in enumerate(docs) if i % args.holdout_every]
    held = [d for i, d in enumerate(docs) if i % args.holdout_every == 0]
    train_jsonl = os.path.join(args.work, "train.jsonl")
    with open(train_jsonl, "w", encoding="utf-8") as f:
        for d in train:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
    held_jsonl = os.path.join(args.work, "held.jsonl")
    with open(held_jsonl, "w", encoding="utf-8") as f:
        for d in held:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
    held_bytes = sum(len(d.encode("utf-8")) for d in held)
    print(f"corpus: {len(docs)} docs; train {len(train)} docs {sum(len(d.encode()) for d in train)/1e6:.1f} MB; "
          f"held out {len(held)} docs {held_bytes/1e6:.1f} MB; vocab {args.vocab_size}; "
          f"pattern {args.pattern}; threads {args.threads}", flush=True)

    from tokenizers import Tokenizer
    rows = []
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))

    # ---- ours
    ours_json = os.path.join(args.work, "ours.json")
    ours_tik = os.path.join(args.work, "ours.tiktoken")
    cmd = [args.mkshards, "tokenizer", "train", "-q", "-n", str(args.vocab_size), "-p", args.pattern,
           "-j", str(args.threads), "-o", ours_tik, train_jsonl]
    for s in args.special:
        cmd += ["-s", s]
    wall, rss, rc = run_measured(cmd)
    if rc:
        sys.exit(f"mkshards failed ({rc})")
    subprocess.check_call([args.mkshards, "tokenizer", "export", "--tokenizer", ours_tik, "--out", ours_json])
    ours = Tokenizer.from_file(ours_json)
    enc = ours.encode_batch(held, add_special_tokens=False)
    ntok = sum(len(e.ids) for e in enc)
    rows.append(("mkshards", wall, rss, held_bytes / ntok))
    # our encoder must give the same ids as HF on our tokenizer.json
    ids_path = os.path.join(args.work, "held.ids")
    subprocess.check_call([args.mkshards, "encode", "-t", ours_tik, "-j", str(args.threads), held_jsonl,
                           "--ids-out", ids_path])
    with open(ids_path) as f:
        ours_ids = [json.loads(line) for line in f]
    same = sum(1 for a, b in zip(ours_ids, enc) if a == b.ids)
    print(f"ids: HF tokenizers on our tokenizer.json == our encoder on {same}/{len(held)} held-out docs",
          flush=True)
    print(f"  mkshards: {wall:.1f}s, {rss:.0f} MiB", flush=True)

    # ---- HF tokenizers
    if not args.skip_hf:
        hf_json = os.path.join(args.work, "hf.json")
        cmd = [sys.executable, __file__, "--child", "hf", "--train-jsonl", train_jsonl, "--out", hf_json,
               "--vocab-size", str(args.vocab_size), "--pattern", args.pattern, "--threads", str(args.threads)]
        for s in args.special:
            cmd += ["--special", s]
        wall, rss, rc = run_measured(cmd, env=env)
        if rc == 0:
            hf = Tokenizer.from_file(hf_json)
            ntok = sum(len(e.ids) for e in hf.encode_batch(held, add_special_tokens=False))
            rows.append(("hf-tokenizers", wall, rss, held_bytes / ntok))
        else:
            rows.append(("hf-tokenizers (failed)", wall, rss, float("nan")))
        print(f"  hf: {wall:.1f}s, {rss:.0f} MiB", flush=True)

    # ---- sentencepiece (BPE), trained on lines
    if not args.skip_spm:
        import sentencepiece as spm
        train_txt = os.path.join(args.work, "train.txt")
        with open(train_txt, "w", encoding="utf-8") as f:
            for d in train:
                for line in d.split("\n"):
                    if line.strip():
                        f.write(line + "\n")
        prefix = os.path.join(args.work, "spm")
        cmd = [sys.executable, __file__, "--child", "spm", "--train-txt", train_txt, "--out", prefix,
               "--vocab-size", str(args.vocab_size), "--threads", str(args.threads)]
        for s in args.special:
            cmd += ["--special", s]
        wall, rss, rc = run_measured(cmd)
        if rc == 0:
            sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
            ntok = 0
            for d in held:
                lines = d.split("\n")
                ntok += sum(len(x) for x in sp.encode(lines)) + (len(lines) - 1)  # newline: 1 token each
            rows.append(("sentencepiece-bpe", wall, rss, held_bytes / ntok))
        else:
            rows.append(("sentencepiece-bpe (failed)", wall, rss, float("nan")))

    print()
    print(f"{'trainer':<24} {'wall s':>8} {'peak RSS MiB':>13} {'bytes/token (held out)':>23}")
    for name, wall, rss, bpt in rows:
        print(f"{name:<24} {wall:>8.1f} {rss:>13.0f} {bpt:>23.4f}")
    base = {r[0]: r for r in rows}
    if "mkshards" in base and "hf-tokenizers" in base:
        o, h = base["mkshards"], base["hf-tokenizers"]
        print(f"\nmkshards vs HF: {h[1] / o[1]:.1f}x faster, RSS {o[2] / h[2]:.2f}x, "
              f"compression {100.0 * (o[3] / h[3] - 1):+.2f}%")


if __name__ == "__main__":
    main()
