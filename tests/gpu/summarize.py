#!/usr/bin/env python3
"""Summary table of tests/gpu/run.sh: reads the run's logs, prints ONE table, appends it to
docs/gpu-results.md (with the date and commit) when --append is given.

Inputs in --logdir: results.txt ("section|key|value" rows written by run.sh), ours_d12.jsonl
(llmtrain --log: one JSON object per step), ours_d12.txt (its stdout), plan_d12.txt,
torch_d12.json (nanogpt_torch.py's JSON line), kernel_table.txt (test_kernels_gpu's rows).

llmtrain's log keys are matched loosely (the CLI is young): tokens/s from a key holding "tok" and
"per_s"/"/s", else tokens / step time; input wait from a key holding "wait"; step time from
"dt"/"step_ms"/"time_ms"; planned and measured peak bytes from keys or text holding "plan" and
"peak". What is not found is printed as "n/a (why)", never guessed.

MFU = tokens/s * (6 N + 6 L T C) / 989e12, N = parameters without the position table (the tied
token embedding counted once, real vocabulary), 6 L T C = causal attention forward + backward.
"""
import argparse
import json
import os
import re
import statistics
import sys

PEAK_FLOPS = 989e12  # H200 SXM dense bf16
PRESETS = {"tiny": (2, 2, 64), "d12": (12, 12, 768), "d24": (24, 16, 1024),
           "d36": (36, 20, 1280), "d48": (48, 25, 1600)}
UNITS = {"": 1, "b": 1, "bytes": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 1e3, "mb": 1e6, "gb": 1e9}


def flops_per_token(model, T, V):
    L, _, C = PRESETS[model]
    n = L * (12 * C * C + 13 * C) + V * C + 2 * C
    return 6 * n + 6 * L * T * C, n


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def jsonl(path):
    out = []
    for line in read(path).splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def pick(d, *want, avoid=()):
    """First numeric value whose key contains every substring of one of the `want` tuples."""
    for w in want:
        for k, v in d.items():
            kl = k.lower()
            if all(s in kl for s in w) and not any(a in kl for a in avoid) and isinstance(v, (int, float)):
                return float(v)
    return None


def bytes_in_text(text, *words):
    """A byte count on a line that holds all `words` (e.g. 'planned', 'peak')."""
    unit = r"([0-9]+(?:\.[0-9]+)?)\s*(GiB|MiB|KiB|GB|MB|kB|bytes|B)\b"
    for line in text.splitlines():  # "plan 1234.5 MiB": the number right after the word first
        m = re.search(re.escape(words[0]) + r"\w*\s*[:=]?\s*" + unit, line, re.I)
        if m:
            return float(m.group(1)) * UNITS[m.group(2).lower()]
    for line in text.splitlines():
        ll = line.lower()
        if all(w in ll for w in words):
            m = re.search(r"([0-9]+(?:\.[0-9]+)?)\s*(GiB|MiB|KiB|GB|MB|kB|bytes|B)\b", line, re.I)
            if m:
                return float(m.group(1)) * UNITS[m.group(2).lower()]
            m = re.search(r"\b([0-9]{6,})\b", line)
            if m:
                return float(m.group(1))
    return None


def fmt_bytes(b):
    return "n/a" if b is None else f"{b / 2**30:.2f} GiB"


def ours_metrics(logdir, T):
    rows = jsonl(os.path.join(logdir, "ours_d12.jsonl"))
    text = read(os.path.join(logdir, "ours_d12.txt"))
    m = {"why": ""}
    if not rows:
        m["why"] = "no llmtrain step log" if not text else "llmtrain wrote no JSON steps"
        return m
    steady = rows[len(rows) // 4:] or rows  # the first quarter is warm-up
    tps = [pick(r, ("tok", "per_s"), ("tok", "/s"), ("tps",)) for r in steady]
    tps = [x for x in tps if x]
    dts = [pick(r, ("step", "ms"), ("dt",), ("time", "ms"), avoid=("wait",)) for r in steady]
    dts = [x for x in dts if x]
    toks = [pick(r, ("tokens",), avoid=("per", "/s", "budget")) for r in steady]
    toks = [x for x in toks if x]
    if tps:
        m["tokens_per_s"] = statistics.median(tps)
    elif dts and toks:
        m["tokens_per_s"] = statistics.median(t / (d / 1e3) for t, d in zip(toks, dts))
    waits = [pick(r, ("wait",)) for r in steady]
    waits = [x for x in waits if x is not None]
    if waits and dts:
        m["wait_share"] = sum(waits) / sum(dts)  # both in the log's own unit: assume ms
    losses = [pick(r, ("loss",), avoid=("val",)) for r in rows]
    losses = [x for x in losses if x is not None]
    if losses:
        m["loss_first"], m["loss_last"] = losses[0], losses[-1]
    allj = {}
    for r in rows:
        allj.update(r)
    plan_text = read(os.path.join(logdir, "plan_d12.txt"))
    m["planned"] = (pick(allj, ("plan", "bytes"), ("plan",)) or bytes_in_text(text, "plan")
                    or bytes_in_text(plan_text, "total"))
    m["peak"] = pick(allj, ("peak", "bytes"), ("measured",)) or bytes_in_text(text, "peak")
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--append", default="")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()

    res = {}
    sweep = []
    for line in read(a.results).splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3:
            if parts[0] == "sweep":
                sweep.append((parts[1], parts[2]))
            else:
                res[(parts[0], parts[1])] = parts[2]
    V = int(res.get(("data", "vocab_size"), "50257") or 50257)
    fpt, nparams = flops_per_token("d12", a.seq, V)

    ours = ours_metrics(a.logdir, a.seq)
    torch_rows = jsonl(os.path.join(a.logdir, "torch_d12.json"))
    tj = torch_rows[-1] if torch_rows else {}

    def mfu(tps):
        return f"{100 * tps * fpt / PEAK_FLOPS:.1f}%" if tps else "n/a"

    o_tps, t_tps = ours.get("tokens_per_s"), tj.get("tokens_per_s")
    lines = []
    lines.append(f"commit {res.get(('meta', 'commit'), '?')}, {res.get(('meta', 'date'), '?')}, "
                 f"gpu: {res.get(('meta', 'gpu'), 'none (dry run)' if a.dry_run else '?')}")
    lines.append(f"d12: T={a.seq}, {a.batch} rows/micro-batch, bf16, vocab {V} "
                 f"({res.get(('data', 'vocab'), '?')}), N={nparams / 1e6:.1f}M, "
                 f"{fpt / 1e9:.3f} GFLOP/token (6N + 6LTC), peak {PEAK_FLOPS / 1e12:.0f} TFLOP/s")
    if res.get(("ours", "source")):
        lines.append(f"ours = {res[('ours', 'source')]}; llmtrain: {res.get(('ours', 'status'), 'ran')}")
    lines.append(f"build warnings: {res.get(('build', 'warnings'), '?')}; gpu tests: "
                 f"{res.get(('ctest', 'gpu'), 'not run')}; shards: {res.get(('data', 'shards'), '?')}")
    lines.append("")
    lines.append("| metric | ours | PyTorch | ratio ours/torch | target |")
    lines.append("|---|---|---|---|---|")
    why_o = ("" if res.get(("ours", "source")) else res.get(("ours", "status"), "")) or ours.get("why")
    why_t = tj.get("error") or res.get(("torch", "status"), "")
    def cell(v, fmt, why):
        return fmt(v) if v is not None else f"n/a{' (' + why + ')' if why else ''}"
    ratio = f"{o_tps / t_tps:.2f}x" if o_tps and t_tps else "n/a"
    lines.append(f"| tokens/s | {cell(o_tps, lambda v: f'{v:,.0f}', why_o)} | "
                 f"{cell(t_tps, lambda v: f'{v:,.0f}', why_t)} | {ratio} | >= 1.2x |")
    lines.append(f"| MFU | {mfu(o_tps)} | {mfu(t_tps)} | | >= 50% (ours) |")
    tc = res.get(("ours", "tc_tokens_per_s"), "")
    if tc and tc != "n/a":
        tcv = float(tc)
        lines.append(f"| tokens/s, tensor-core attention | {tcv:,.0f} (MFU {mfu(tcv)}) | | "
                     f"{f'{tcv / t_tps:.2f}x' if t_tps else 'n/a'} | >= 1.2x |")
    ws = ours.get("wait_share")
    lines.append(f"| input wait / step time | {cell(ws, lambda v: f'{100 * v:.2f}%', why_o)} | n/a | | < 1% |")
    tpk = tj.get("peak_mem_bytes")
    pk_ratio = f"{ours['peak'] / tpk:.2f}x" if ours.get("peak") and tpk else "n/a"
    lines.append(f"| peak memory (measured) | {cell(ours.get('peak'), fmt_bytes, why_o)} | "
                 f"{cell(tpk, fmt_bytes, why_t)} | {pk_ratio} | < torch |")
    pl, pk = ours.get("planned"), ours.get("peak")
    dev = f"{100 * (pk - pl) / pl:+.1f}%" if pl and pk else "n/a"
    lines.append(f"| planned peak | {cell(pl, fmt_bytes, why_o)} | | measured vs planned {dev} | within 5% |")
    lf, ll = ours.get("loss_first"), ours.get("loss_last")
    tl = (tj.get("loss_first"), tj.get("loss_last"))
    lines.append(f"| loss first -> last | {f'{lf:.3f} -> {ll:.3f}' if lf is not None else 'n/a'} | "
                 f"{f'{tl[0]:.3f} -> {tl[1]:.3f}' if tl[0] is not None else 'n/a'} | | falling |")
    if tj.get("data"):
        lines.append(f"| torch input | | {tj['data']} | | |")
    if sweep:
        lines.append("")
        lines.append("| sweep config (model/T/precision/token budget/mem budget) | result |")
        lines.append("|---|---|")
        for tag, r in sweep:
            lines.append(f"| {tag} | {r} |")
        n_oom = sum(1 for _, r in sweep if r.startswith("OOM"))
        n_fail = sum(1 for _, r in sweep if r.startswith("failed") or r.startswith("plan error"))
        n_untrained = sum(1 for _, r in sweep if "not trained" in r)
        if n_untrained:
            lines.append(f"| (not trained: no CUDA backend) | {n_untrained} configs only planned |")
        lines.append(f"| **OOMs** | **{n_oom}** (other failures: {n_fail}; target 0) |")
    proj = res.get(("kernels", "projection"), "")
    if proj:
        lines.append("")
        lines.append(f"Projected from kn_cuda kernel timings (bench_kernels_gpu, d12, 16 x {a.seq} tokens): {proj}")
    ceil = res.get(("meta", "ceilings"), "")
    if ceil:
        lines.append(f"Measured ceilings: {ceil}")
    bt = [ln for ln in read(os.path.join(a.logdir, "bench_kernels.txt")).splitlines() if ln.startswith("|")]
    if bt:
        lines.append("")
        lines.append("Kernel timings (bench_kernels_gpu):")
        lines.append("")
        lines.extend(bt)
    kt = read(os.path.join(a.logdir, "kernel_table.txt")).strip()
    if kt:
        lines.append("")
        lines.append("Kernel checks (test_kernels_gpu):")
        lines.append("")
        lines.append(kt)
    table = "\n".join(lines)
    print("\n" + table)
    if a.append and not a.dry_run:
        with open(a.append, "a", encoding="utf-8") as f:
            if f.tell() == 0:
                f.write("# GPU results\n\nOne section per run of tests/gpu/run.sh (newest last).\n")
            f.write(f"\n## {res.get(('meta', 'date'), '?')} - commit {res.get(('meta', 'commit'), '?')}\n\n")
            f.write(table + "\n")
        print(f"\nappended to {a.append}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
