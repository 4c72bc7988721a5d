#!/usr/bin/env python3
"""Chat-record benchmark (issue 28 item 7): `mkshards build --format chat`
against (1) `mkshards build` of the same text as plain documents and (2)
TRL-style Python preprocessing of the same records.

    /work/venv-model/bin/python tools/bench/bench_chat.py [--mkshards build/tools/mkshards] [--mb 16]

Records: conversations made from ../shared/corpus (web, multi, en-books): each
document's paragraphs become up to 8 alternating user / assistant turns after a
system message; the plain-text twin of a record is its messages' contents
joined by newlines, so both builds read the same text volume. Tokenizer:
../shared/vocab/hf/qwen2 (ChatML). Nothing is downloaded.

(1) wall time and CPU time of `mkshards build -L 2048 -j2` (median of --runs);
    the ratio asked for is chat MB/s / plain MB/s >= 0.8.
(2) TRL-style: datasets.Dataset.from_json + .map(num_proc=2) of
    tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True,
    return_assistant_tokens_mask=True) with ChatML written with {% generation %}
    blocks (as TRL's assistant-only loss needs; same text as mkshards' chatml,
    mask = assistant content + <|im_end|>). The ids and masks of the first
    conversations are compared with `mkshards encode --mask-out`. Asked: mkshards
    >= 10x its MB/s.
Needs datasets and transformers (in /work/venv-model).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
CHATML_GEN = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{{ '\\n' }}{% else %}{{ message['content'] + '<|im_end|>' + '\\n' }}{% endif %}"
    "{% endfor %}"
)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_records(tmp, mb):
    """chat.jsonl and plain.jsonl with ~mb MB of message text; returns (records, text bytes)."""
    chat = open(os.path.join(tmp, "chat.jsonl"), "w")
    plain = open(os.path.join(tmp, "plain.jsonl"), "w")
    n = vol = 0
    for name in ("web", "multi", "en-books"):
        raw = subprocess.run(["zstd", "-dc", os.path.join(SHARED, "corpus", name + ".jsonl.zst")],
                             capture_output=True, check=True).stdout.decode()
        for line in raw.splitlines():
            if not line.strip() or vol >= mb * 1e6:
                continue
            t = json.loads(line)["text"]
            parts = [p for p in t.split("\n") if p.strip()] or [t]
            if len(parts) < 2:
                parts = [t[: len(t) // 2], t[len(t) // 2:]]
            k = max(1, (len(parts) + 7) // 8)
            turns = ["\n".join(parts[i:i + k]) for i in range(0, len(parts), k)]
            msgs = [{"role": "system", "content": "You are a helpful assistant."}]
            msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": p} for i, p in enumerate(turns)]
            if msgs[-1]["role"] != "assistant":
                msgs.append({"role": "assistant", "content": "ok"})
            chat.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
            plain.write(json.dumps({"text": "\n".join(m["content"] for m in msgs)}, ensure_ascii=False) + "\n")
            vol += sum(len(m["content"].encode()) for m in msgs)
            n += 1
    chat.close()
    plain.close()
    return n, vol


def time_build(mks, args, runs):
    """median wall and CPU (children user + sys) seconds of `mkshards build ARGS`."""
    walls, cpus = [], []
    for _ in range(runs):
        out = args[args.index("-o") + 1]
        shutil.rmtree(out, ignore_errors=True)
        c0 = os.times()
        t0 = time.perf_counter()
        subprocess.run([mks, "build", "-q"] + args, check=True)
        walls.append(time.perf_counter() - t0)
        c1 = os.times()
        cpus.append((c1.children_user - c0.children_user) + (c1.children_system - c0.children_system))
    return statistics.median(walls), statistics.median(cpus)


_tok = None


def _init_tok():
    global _tok
    if _tok is None:
        from transformers import AutoTokenizer
        _tok = AutoTokenizer.from_pretrained(os.path.join(SHARED, "vocab", "hf", "qwen2"))
        _tok.chat_template = CHATML_GEN
    return _tok


def _trl_map(ex):
    out = _init_tok().apply_chat_template(ex["messages"], tokenize=True, return_dict=True,
                                          return_assistant_tokens_mask=True)
    return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mkshards", default=os.path.join(ROOT, "build", "tools", "mkshards"))
    ap.add_argument("--mb", type=float, default=16.0, help="MB of message text (default 16)")
    ap.add_argument("--trl-mb", type=float, default=4.0, help="MB of it for the Python side (default 4)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    tok_json = os.path.join(SHARED, "vocab", "hf", "qwen2", "tokenizer.json")
    tmp = tempfile.mkdtemp(prefix="bench_chat.")
    try:
        n, vol = make_records(tmp, a.mb)
        log(f"bench_chat: {n} conversations, {vol / 1e6:.1f} MB of message text")
        chat, plain = os.path.join(tmp, "chat.jsonl"), os.path.join(tmp, "plain.jsonl")
        common = ["-t", tok_json, "-L", "2048", "-j2"]
        pw, pc = time_build(a.mkshards, common + ["-o", os.path.join(tmp, "op"), plain], a.runs)
        cw, cc = time_build(a.mkshards, common + ["--format", "chat", "--chat-template", "chatml", "--over-long",
                                                  "chunk", "-o", os.path.join(tmp, "oc"), chat], a.runs)
        res = {"conversations": n, "text_mb": vol / 1e6,
               "plain": {"wall_s": pw, "cpu_s": pc, "mb_s": vol / 1e6 / pw},
               "chat": {"wall_s": cw, "cpu_s": cc, "mb_s": vol / 1e6 / cw}}
        res["chat_vs_plain_wall"] = pw / cw
        res["chat_vs_plain_cpu"] = pc / cc

        # the Python side on the first trl_mb MB of the same records
        sub = os.path.join(tmp, "chat_sub.jsonl")
        svol = sn = 0
        with open(chat) as f, open(sub, "w") as o:
            for line in f:
                if svol >= a.trl_mb * 1e6:
                    break
                o.write(line)
                svol += sum(len(m["content"].encode()) for m in json.loads(line)["messages"])
                sn += 1
        import datasets
        datasets.disable_progress_bars()
        os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(tmp, "hf_cache"))
        t0 = time.perf_counter()
        ds = datasets.Dataset.from_json(sub, cache_dir=os.path.join(tmp, "hf_cache"))
        ds = ds.map(_trl_map, num_proc=2, remove_columns=["messages"], load_from_cache_file=False)
        tw = time.perf_counter() - t0
        sw, _ = time_build(a.mkshards, common + ["--format", "chat", "--chat-template", "chatml", "--over-long",
                                                 "chunk", "-o", os.path.join(tmp, "os"), sub], a.runs)
        res["trl"] = {"conversations": sn, "text_mb": svol / 1e6, "wall_s": tw, "mb_s": svol / 1e6 / tw,
                      "mkshards_wall_s": sw, "mkshards_mb_s": svol / 1e6 / sw}
        res["mkshards_vs_trl"] = tw / sw
        # parity on the first 50 conversations: ids and masks as mkshards encode gives them
        head = os.path.join(tmp, "head.jsonl")
        with open(sub) as f, open(head, "w") as o:
            for i, line in enumerate(f):
                if i == 50:
                    break
                o.write(line)
        subprocess.run([a.mkshards, "encode", "-t", tok_json, "--format", "chat", "--chat-template", "chatml", head,
                        "--ids-out", os.path.join(tmp, "h.ids"), "--mask-out", os.path.join(tmp, "h.mask")],
                       check=True)
        ids = [json.loads(x) for x in open(os.path.join(tmp, "h.ids"))]
        masks = [json.loads(x) for x in open(os.path.join(tmp, "h.mask"))]
        same = sum(1 for i in range(len(ids)) if ids[i] == ds[i]["input_ids"] and masks[i] == ds[i]["assistant_masks"])
        res["parity_first"] = {"compared": len(ids), "identical": same}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"text {res['text_mb']:.1f} MB in {res['conversations']} conversations (qwen2, -L 2048, -j2, "
          f"median of {a.runs})")
    print(f"  plain-text build  {res['plain']['mb_s']:7.1f} MB/s  ({res['plain']['wall_s']:.2f} s, "
          f"CPU {res['plain']['cpu_s']:.2f} s)")
    print(f"  chat build        {res['chat']['mb_s']:7.1f} MB/s  ({res['chat']['wall_s']:.2f} s, "
          f"CPU {res['chat']['cpu_s']:.2f} s)")
    print(f"  chat / plain      {res['chat_vs_plain_wall']:.2f} (wall)  {res['chat_vs_plain_cpu']:.2f} (CPU)"
          "   [asked >= 0.80]")
    t = res["trl"]
    print(f"TRL-style datasets.map(num_proc=2) on {t['text_mb']:.1f} MB ({t['conversations']} conversations): "
          f"{t['mb_s']:.2f} MB/s ({t['wall_s']:.1f} s); mkshards build on the same: {t['mkshards_mb_s']:.1f} MB/s "
          f"({t['mkshards_wall_s']:.2f} s)")
    print(f"  mkshards / TRL    {res['mkshards_vs_trl']:.1f}x   [asked >= 10x]")
    p = res["parity_first"]
    print(f"  ids + masks identical to transformers' on {p['identical']}/{p['compared']} conversations")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
