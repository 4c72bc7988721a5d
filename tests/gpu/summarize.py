#!/usr/bin/env python3
"""Summary of tests/gpu/run.sh (stdlib only).

  summarize.py --results R --checks C --logdir D [--seq 1024 --batch 32] [--rehearse]
               [--full results.md] [--headline headline.txt] [--json summary.json]
               [--append docs/gpu-results.md]
  summarize.py --print-details results.md     (the part of results.md before the headline)

Inputs in --logdir: results.txt ("section|key|value"), checks.txt ("name|STATUS|detail"),
ours_d12.jsonl (llmtrain --log), plan_d12.txt, torch_d12.json (nanogpt_torch.py's JSON line),
torch_mem.json (tests/gpu/torch_mem.py), kernel_table.txt, bench_kernels.txt.

The HEADLINE (printed last by run.sh, kept under 3,000 characters) holds the numbers that
decide the run (tokens/s, MFU, input wait, peak memory like with like, plan vs measured,
fp16 skips, the memory edge, the sweep's OOMs) and one row per check; the long tables
(kernel checks and timings, the sweep) go before it and into results.md.

MFU = tokens/s * (6 N + 6 L T C) / 989e12, N = parameters without the position table.
Peak memory, like with like: ours = llmtrain's peak_bytes (cudaMemGetInfo in use after step
1: context + libraries + arena); torch = torch_mem.json's peak_like_ours (cudaMemGetInfo in
use at exit - reserved at exit + max_memory_reserved: context + libraries + the allocator's
high-water mark)."""
import argparse
import json
import os
import statistics
import sys

PEAK_FLOPS = 989e12  # H200 SXM dense bf16
PRESETS = {"tiny": (2, 2, 64), "d12": (12, 12, 768), "d24": (24, 16, 1024),
           "d36": (36, 20, 1280), "d48": (48, 25, 1600)}
HEADLINE_MAX = 3000
MARK = "== HEADLINE (tests/gpu/run.sh) =="


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


def flops_per_token(model, T, V):
    L, _, C = PRESETS[model]
    n = L * (12 * C * C + 13 * C) + V * C + 2 * C
    return 6 * n + 6 * L * T * C, n


def gib(b):
    return "n/a" if not b else f"{b / 2**30:.2f} GiB"


def ours_metrics(logdir):
    rows = jsonl(os.path.join(logdir, "ours_d12.jsonl"))
    m = {}
    steps = [r for r in rows if "step" in r]
    for r in rows:
        for k in ("planned_bytes", "peak_bytes", "arena_bytes", "baseline_bytes"):
            if k in r:
                m[k] = r[k]
    if not steps:
        return m
    steady = steps[len(steps) // 4:] or steps  # the first quarter is warm-up
    tps = [r["tok_per_s"] for r in steady if isinstance(r.get("tok_per_s"), (int, float))]
    if tps:
        m["tokens_per_s"] = statistics.median(tps)
    w = sum(r.get("wait_ms", 0) or 0 for r in steady)
    d = sum(r.get("step_ms", 0) or 0 for r in steady)
    if d:
        m["wait_share"] = w / d
    losses = [r["loss"] for r in steps if isinstance(r.get("loss"), (int, float))]
    if losses:
        m["loss_first"], m["loss_last"] = losses[0], losses[-1]
    m["skipped"] = sum(int(r.get("skipped", 0) or 0) for r in steps)
    m["steps"] = len(steps)
    return m


def cut(s, n):
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "~"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results")
    ap.add_argument("--checks")
    ap.add_argument("--logdir")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rehearse", action="store_true")
    ap.add_argument("--full")
    ap.add_argument("--headline")
    ap.add_argument("--json")
    ap.add_argument("--append", default="")
    ap.add_argument("--print-details")
    a = ap.parse_args()

    if a.print_details:
        text = read(a.print_details)
        print(text.split(MARK)[0].rstrip())
        return 0

    res, sweep = {}, []
    for line in read(a.results).splitlines():
        p = line.split("|", 2)
        if len(p) == 3:
            if p[0] == "sweep":
                sweep.append((p[1], p[2]))
            else:
                res[(p[0], p[1])] = p[2]
    checks = []
    for line in read(a.checks).splitlines():
        p = line.split("|", 2)
        if len(p) == 3:
            checks.append((p[0], p[1], p[2]))
    try:
        V = int(res.get(("data", "vocab_size"), "50257") or 50257)
    except ValueError:
        V = 50257
    fpt, nparams = flops_per_token("d12", a.seq, V)
    ours = ours_metrics(a.logdir)
    tj = (jsonl(os.path.join(a.logdir, "torch_d12.json")) or [{}])[-1]
    tm = (jsonl(os.path.join(a.logdir, "torch_mem.json")) or [{}])[-1]

    def mfu(tps):
        return f"{100 * tps * fpt / PEAK_FLOPS:.1f}%" if tps and not a.rehearse else "n/a"

    def num(v, f="{:,.0f}"):
        return f.format(v) if isinstance(v, (int, float)) else "n/a"

    # ---- details (long; before the headline) ----
    det = []
    det.append(f"# tests/gpu/run.sh - commit {res.get(('meta', 'commit'), '?')}, {res.get(('meta', 'date'), '?')}")
    det.append("")
    det.append(f"gpu: {res.get(('meta', 'gpu'), '?')}; C deps: {res.get(('build', 'deps'), '?')}; "
               f"build warnings: {res.get(('build', 'warnings'), '?')}; vocab: {res.get(('data', 'vocab'), '?')} "
               f"({V}); ours: {res.get(('ours', 'source'), '?')}")
    if res.get(("meta", "ceilings")):
        det.append(f"measured ceilings: {res[('meta', 'ceilings')]}")
    if res.get(("kernels", "projection")):
        det.append(f"projected from kernel timings (bench_kernels_gpu, d12): {res[('kernels', 'projection')]}")
    if res.get(("meta", "att_passed")):
        det.append(res[("meta", "att_passed")])
    for k, v in res.items():
        if k[0] == "open":  # run.sh step 8c: u32 shards of an open model's vocabulary, trained on the GPU
            det.append(f"open-model vocabulary {k[1]}: {v}")
    if res.get(("llama", "source")):
        det.append(f"Llama ~1B (step 10b) ours: {res[('llama', 'source')]}")
    for k in ("plan", "measured"):
        if res.get(("edge", k)):
            det.append(f"memory edge {k}: {res[('edge', k)]}")
    if tj:
        det.append("torch: " + cut(json.dumps(tj), 400))
    if tm:
        det.append("torch memory: " + cut(json.dumps(tm), 300))
    det.append("")
    det.append("| check | status | detail |")
    det.append("|---|---|---|")
    for n, s, d in checks:
        det.append(f"| {n} | {s} | {d} |")
    if sweep:
        det.append("")
        det.append("| sweep (model/T/precision/mem budget) | result |")
        det.append("|---|---|")
        det.extend(f"| {t} | {r} |" for t, r in sweep)
    bt = [ln for ln in read(os.path.join(a.logdir, "bench_kernels.txt")).splitlines() if ln.startswith("|")]
    if bt:
        det += ["", "Kernel timings (bench_kernels_gpu):", ""] + bt
    kt = read(os.path.join(a.logdir, "kernel_table.txt")).strip()
    if kt:
        det += ["", "Kernel checks (test_kernels_gpu):", "", kt]

    # ---- headline (short; printed last) ----
    hl = [MARK]
    hl.append(cut(f"commit {res.get(('meta', 'commit'), '?')} | {res.get(('meta', 'date'), '?')} | gpu: "
                  f"{res.get(('meta', 'gpu'), '?')} | {res.get(('meta', 'elapsed'), '?')} s of "
                  f"{res.get(('meta', 'budget'), '?')} s", 200))
    hl.append(cut(f"ours: {res.get(('ours', 'source'), 'not run')}", 160))
    if res.get(("meta", "fallbacks")):
        hl.append(cut(f"fallbacks: {res[('meta', 'fallbacks')]}", 160))
    for k in ("variants", "variants2", "variants3"):
        if res.get(("meta", k)):
            hl.append(cut(f"opt-in kernel trained: {res[('meta', k)]}", 160))
    hl.append("| metric | ours | PyTorch | ratio | target |")
    hl.append("|---|---|---|---|---|")
    o_tps, t_tps = ours.get("tokens_per_s"), tj.get("tokens_per_s")
    ratio = f"{o_tps / t_tps:.2f}x" if o_tps and t_tps else "n/a"
    hl.append(f"| tokens/s | {num(o_tps)} | {num(t_tps)} | {ratio} | >= 1.2x |")
    hl.append(f"| MFU (989 TFLOP/s) | {mfu(o_tps)} | {mfu(t_tps)} | | >= 50% |")
    ws = ours.get("wait_share")
    hl.append(f"| input wait / step | {num(100 * ws, '{:.2f}%') if ws is not None else 'n/a'} | | | < 1% |")
    opk, tpk = ours.get("peak_bytes"), tm.get("peak_like_ours")
    pr = f"{opk / tpk:.2f}x" if opk and tpk else "n/a"
    hl.append(f"| peak memory (cudaMemGetInfo, context incl.) | {gib(opk)} | {gib(tpk)} | {pr} | < torch |")
    pl = ours.get("planned_bytes")
    dev = f"{100 * (opk - pl) / pl:+.1f}%" if pl and opk else "n/a"
    hl.append(f"| d12 plan vs measured peak | {gib(pl)} -> {gib(opk)} | | {dev} | within 5% |")
    lf, ll = ours.get("loss_first"), ours.get("loss_last")
    tl = (tj.get("loss_first"), tj.get("loss_last"))
    hl.append(f"| loss first -> last | {num(lf, '{:.3f}')} -> {num(ll, '{:.3f}')} | "
              f"{num(tl[0], '{:.3f}')} -> {num(tl[1], '{:.3f}')} | | falling |")
    if res.get(("edge", "measured")) or res.get(("edge", "plan")):
        hl.append(cut(f"| memory edge | {res.get(('edge', 'measured'), res.get(('edge', 'plan'), ''))} | | | "
                      f">= 95% planned, within 5%, 0 OOM |", 230))
    if sweep:
        n_oom = sum(1 for _, r in sweep if r.startswith("OOM"))
        n_tr = sum(1 for _, r in sweep if r.startswith("trained"))
        hl.append(f"| sweep | {len(sweep)} configs: {n_tr} trained, {n_oom} OOM | | | 0 OOM |")
    if res.get(("dp", "scaling")):  # run.sh step 8b: tokens/s per GPU, scaling efficiency vs 1 GPU
        hl.append(cut(f"| multi-GPU d12 0.5M tok/step (GPUs: tok/s/GPU, efficiency) | {res[('dp', 'scaling')]} "
                      f"| | | >= 90% at 8 |", 300))
    if res.get(("llama", "ours")) or res.get(("llama", "torch")):  # run.sh step 10b: Llama-shape ~1B bf16
        hl.append(cut(f"| Llama {res.get(('llama', 'params'), '~1B')} bf16 tokens/s (MFU) | "
                      f"{res.get(('llama', 'ours'), 'n/a')} | {res.get(('llama', 'torch'), 'n/a')} | "
                      f"{res.get(('llama', 'ratio'), 'n/a')} | reported |", 230))
    hl.append("")
    hl.append("| check | status | detail |")
    hl.append("|---|---|---|")
    budget_left = HEADLINE_MAX - 400 - sum(len(x) + 1 for x in hl)
    per = max(40, min(110, budget_left // max(1, len(checks)) - 30))
    for n, s, d in checks:
        hl.append(f"| {n} | {s} | {cut(d, per)} |")
    headline = "\n".join(hl)
    if len(headline) > HEADLINE_MAX - 200:  # never: the rows are cut above; a last guard
        headline = headline[: HEADLINE_MAX - 200] + "\n(headline cut)"

    full = "\n".join(det) + "\n\n" + headline + "\n"
    if a.full:
        with open(a.full, "w", encoding="utf-8") as f:
            f.write(full)
    if a.headline:
        with open(a.headline, "w", encoding="utf-8") as f:
            f.write(headline + "\n")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"meta": {f"{k[0]}.{k[1]}": v for k, v in res.items()},
                       "checks": [{"name": n, "status": s, "detail": d} for n, s, d in checks],
                       "ours": ours, "torch": tj, "torch_mem": tm, "sweep": sweep,
                       "failed": [n for n, s, _ in checks if s in ("FAIL", "TIMEOUT", "NOTRUN")]}, f, indent=1)
            f.write("\n")
    if a.append:
        with open(a.append, "a", encoding="utf-8") as f:
            if f.tell() == 0:
                f.write("# GPU results\n\nOne section per run of tests/gpu/run.sh (newest last).\n")
            kind = "rehearsal (no GPU)" if a.rehearse else "GPU run"
            f.write(f"\n## {res.get(('meta', 'date'), '?')} - commit {res.get(('meta', 'commit'), '?')} - {kind}\n\n")
            f.write(full.replace("# tests/gpu/run.sh - ", "", 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
