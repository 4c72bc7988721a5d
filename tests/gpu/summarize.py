#!/usr/bin/env python3
"""Summary of tests/gpu/run.sh (stdlib only).

  summarize.py --results R --checks C --logdir D [--seq 1024 --batch 32] [--rehearse]
               [--full results.md] [--headline headline.txt] [--json summary.json]
               [--append docs/gpu-results.md]
  summarize.py --print-details results.md     (the part of results.md before the headline)
  summarize.py --speed-row ID --logdir D --model M --seq T --rows R [--doc] --bar 'ratio>=1.2'|'mfu>=50'
               --vocab V --ours-rc N --torch-rc N [--torch-note WHY] [--label L] [--rehearse]
               (one row of the speed table, run.sh SPEED=1: prints STATUS<tab>detail<tab>JSON record)

Inputs in --logdir: results.txt ("section|key|value"), checks.txt ("name|STATUS|detail"),
ours_d12.jsonl (llmtrain --log), plan_d12.txt, torch_d12.json (nanogpt_torch.py's JSON line),
torch_mem.json (tests/gpu/torch_mem.py), kernel_table.txt, bench_kernels.txt.

The HEADLINE (printed last by run.sh, kept under 3,000 characters) holds the numbers that
decide the run (tokens/s, MFU, input wait, peak memory like with like, plan vs measured,
fp16 skips, the memory edge, the sweep's OOMs) and one row per check; the long tables
(kernel checks and timings, the sweep) go before it and into results.md.

MFU = tokens/s * (6 N + 6 L T C) / 989e12, N = parameters without the position table
(989 TFLOP/s: the dense bf16 peak of both the H100 SXM and the H200; attention counted at the
full T, also for --doc-mask rows, whose documents need fewer).

Speed table (run.sh SPEED=1, --speed): rows "speed|ID|JSON" of results.txt, each written by
--speed-row from speed_ID_ours.jsonl (llmtrain --log: median tok_per_s after the first quarter of
the steps), speed_ID_torch.json (nanogpt_torch.py's line: median after its warm-up steps) and
speed_ID_torch_mem.json; the headline shows it in place of the d12 table.
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


SPEED_RC = {0: "PASS", 124: "TIMEOUT", 125: "NOTRUN"}


def last_json(path):
    rows = jsonl(path)
    return rows[-1] if rows else {}


def speed_row(a):
    """One row of the speed table from its logs: (status, detail, record). Status PASS / FAIL / TIMEOUT /
    NOTRUN: a side that did not finish decides it; else the bar (ratio >= x: ours / PyTorch tokens/s;
    mfu >= x: ours' MFU in %). In a rehearsal the bar is not applied (CPU twins: the flow only)."""
    d, rid = a.logdir, a.speed_row
    rec = {"row": rid, "label": a.label or rid, "model": a.model, "seq": a.seq, "rows": a.rows,
           "doc_mask": bool(a.doc), "bar": a.bar, "ours_rc": a.ours_rc, "torch_rc": a.torch_rc}
    steps = [r for r in jsonl(os.path.join(d, f"speed_{rid}_ours.jsonl")) if "step" in r]
    steady = steps[len(steps) // 4:]
    tps = [r["tok_per_s"] for r in steady if isinstance(r.get("tok_per_s"), (int, float))]
    o_tps = statistics.median(tps) if tps else None
    for r in jsonl(os.path.join(d, f"speed_{rid}_ours.jsonl")):
        for k in ("peak_bytes", "planned_bytes"):
            if k in r:
                rec["ours_" + k] = r[k]
    tj = last_json(os.path.join(d, f"speed_{rid}_torch.json"))
    tm = last_json(os.path.join(d, f"speed_{rid}_torch_mem.json"))
    t_tps = tj.get("tokens_per_s") if isinstance(tj.get("tokens_per_s"), (int, float)) else None
    fpt = flops_per_token(a.model, a.seq, a.vocab)[0] if a.model in PRESETS else 0
    mfu = (lambda t: 100.0 * t * fpt / PEAK_FLOPS if t and fpt and not a.rehearse else None)
    rec.update({"ours_tokens_per_s": o_tps, "ours_steps": len(steps), "ours_timed_steps": len(tps),
                "torch_tokens_per_s": t_tps, "torch_timed_steps": tj.get("steps"), "ours_mfu": mfu(o_tps),
                "torch_mfu": mfu(t_tps), "ratio": o_tps / t_tps if o_tps and t_tps else None,
                "torch_warmup_s": tj.get("warmup_s"), "torch_peak_like_ours": tm.get("peak_like_ours"),
                "torch_attention": tj.get("attention", "SDPA causal (flash)" if tj else None),
                "torch_data": tj.get("data"), "torch_error": tj.get("error"), "torch_note": a.torch_note,
                "flops_per_token": fpt, "rehearse": bool(a.rehearse)})
    pct = (lambda v: f"{v:.1f}%" if v is not None else "n/a")
    o_txt = f"ours {o_tps:,.0f} tok/s (MFU {pct(rec['ours_mfu'])})" if o_tps else "ours n/a"
    t_txt = (f"torch {t_tps:,.0f} (MFU {pct(rec['torch_mfu'])})" if t_tps else
             f"torch n/a ({a.torch_note or tj.get('error') or 'rc %d' % a.torch_rc})")
    r_txt = f"{rec['ratio']:.2f}x" if rec["ratio"] else "ratio n/a"
    kind, _, thr = a.bar.partition(">=")
    thr = float(thr or 0)
    bar_txt = f"ratio >= {thr:.1f}x" if kind == "ratio" else f"MFU >= {thr:g}%"
    rec["bar_text"] = bar_txt
    ours_log = read(os.path.join(d, f"speed_{rid}_ours.txt")).strip().splitlines()

    def done(st, why):
        rec["status"], rec["why"] = st, why
        return st, cut(f"{why}; {o_txt}, {t_txt}, {r_txt}", 200), rec

    if a.skip:
        rec["status"], rec["why"] = a.skip, a.why
        return a.skip, cut(a.why, 200), rec
    if a.ours_rc != 0:
        return done(SPEED_RC.get(a.ours_rc, "FAIL"),
                    f"ours exit {a.ours_rc}: {ours_log[-1][:100] if ours_log else 'no output'}")
    if not o_tps:
        return done("FAIL", "ours logged no step rows")
    torch_skipped = a.torch_rc == 125 and a.torch_note
    if a.torch_rc != 0 and not torch_skipped:
        return done(SPEED_RC.get(a.torch_rc, "FAIL"), f"torch exit {a.torch_rc}: {tj.get('error') or 'see logs'}")
    if a.torch_rc == 0 and not t_tps:
        return done("FAIL", f"torch wrote no tokens/s: {tj.get('error') or 'no JSON line'}")
    if a.rehearse:
        return done("PASS", "CPU twin: the flow only, bar " + bar_txt + " not applied")
    if kind == "mfu":
        v = rec["ours_mfu"]
        ok = v is not None and v >= thr
        return done("PASS" if ok else "FAIL", f"bar {bar_txt}: {'met' if ok else 'MISSED'} ({pct(v)})")
    if torch_skipped:
        return done("FAIL", f"bar {bar_txt}: no baseline ({a.torch_note})")
    ok = rec["ratio"] >= thr
    return done("PASS" if ok else "FAIL", f"bar {bar_txt}: {'met' if ok else 'MISSED'} ({r_txt})")


def speed_table(records):
    """The headline's speed table: one line per row, in run order."""
    out = ["| row | rows x T | ours tok/s (MFU) | PyTorch tok/s (MFU) | ratio | bar | verdict |",
           "|---|---|---|---|---|---|---|"]
    for r in records:
        def cell(t, m):
            if not isinstance(t, (int, float)):
                return "n/a"
            return f"{t:,.0f} ({m:.1f}%)" if isinstance(m, (int, float)) else f"{t:,.0f}"
        ratio = f"{r['ratio']:.2f}x" if isinstance(r.get("ratio"), (int, float)) else "n/a"
        out.append(f"| {r.get('label', r.get('row'))} | {r.get('rows')} x {r.get('seq')} | "
                   f"{cell(r.get('ours_tokens_per_s'), r.get('ours_mfu'))} | "
                   f"{cell(r.get('torch_tokens_per_s'), r.get('torch_mfu'))} | {ratio} | {r.get('bar_text', '')} | "
                   f"{r.get('status', '?')} |")
    return out


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
    ap.add_argument("--speed", action="store_true", help="run.sh SPEED=1: the speed table heads the headline")
    ap.add_argument("--speed-row", default="")
    ap.add_argument("--model", default="d12")
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--doc", action="store_true")
    ap.add_argument("--bar", default="ratio>=1.0")
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ours-rc", type=int, default=0)
    ap.add_argument("--torch-rc", type=int, default=0)
    ap.add_argument("--torch-note", default="")
    ap.add_argument("--label", default="")
    ap.add_argument("--skip", default="", help="--speed-row of a row that did not start: its status")
    ap.add_argument("--why", default="", help="... and why")
    a = ap.parse_args()

    if a.speed_row:
        st, det, rec = speed_row(a)
        print(f"{st}\t{det}\t{json.dumps(rec)}")
        return 0
    if a.print_details:
        text = read(a.print_details)
        print(text.split(MARK)[0].rstrip())
        return 0

    res, sweep, speed = {}, [], []
    for line in read(a.results).splitlines():
        p = line.split("|", 2)
        if len(p) == 3:
            if p[0] == "sweep":
                sweep.append((p[1], p[2]))
            elif p[0] == "speed":
                try:
                    speed.append(json.loads(p[2]))
                except json.JSONDecodeError:
                    speed.append({"row": p[1], "status": "?", "why": "unreadable record"})
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
    if speed:
        det.append("")
        det.append("| speed row | ours: steps timed, peak (plan) | PyTorch: steps timed, warm-up s, peak | "
                   "PyTorch attention | data | why |")
        det.append("|---|---|---|---|---|---|")
        for r in speed:
            det.append(f"| {r.get('label', r.get('row'))} | {r.get('ours_timed_steps', 'n/a')}, "
                       f"{gib(r.get('ours_peak_bytes'))} ({gib(r.get('ours_planned_bytes'))}) | "
                       f"{r.get('torch_timed_steps') or 'n/a'}, "
                       f"{num(r.get('torch_warmup_s'), '{:.0f}')}, {gib(r.get('torch_peak_like_ours'))} | "
                       f"{r.get('torch_attention') or 'n/a'} | {cut(r.get('torch_data') or '', 160)} | "
                       f"{cut(r.get('why', ''), 120)} |")
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
    if not a.speed:
        hl.append(cut(f"ours: {res.get(('ours', 'source'), 'not run')}", 160))
    if res.get(("meta", "fallbacks")):
        hl.append(cut(f"fallbacks: {res[('meta', 'fallbacks')]}", 160))
    for k in ("variants", "variants2", "variants3"):
        if res.get(("meta", k)):
            hl.append(cut(f"opt-in kernel trained: {res[('meta', k)]}", 160))
    if a.speed:
        hl.append(cut("speed table (SPEED=1; issue 31 item 2): same rows x T and data both sides, "
                      + ("CPU twins (tiny, fp32; bars not applied); " if a.rehearse else "bf16; ")
                      + "tokens/s medians with the warm-up excluded; MFU = tok/s x (6N + 6LTC) / 989 TFLOP/s "
                      "(H100 SXM / H200 dense bf16)", 300))
        hl.extend(speed_table(speed))
        if res.get(("meta", "speed_next")):
            hl.append(cut(res[("meta", "speed_next")], 200))
    o_tps, t_tps = ours.get("tokens_per_s"), tj.get("tokens_per_s")
    # the d12 table (a SPEED=1 run has none of its rows: they go nowhere)
    d12 = [] if a.speed else hl
    d12.append("| metric | ours | PyTorch | ratio | target |")
    d12.append("|---|---|---|---|---|")
    ratio = f"{o_tps / t_tps:.2f}x" if o_tps and t_tps else "n/a"
    d12.append(f"| tokens/s | {num(o_tps)} | {num(t_tps)} | {ratio} | >= 1.2x |")
    d12.append(f"| MFU (989 TFLOP/s) | {mfu(o_tps)} | {mfu(t_tps)} | | >= 50% |")
    ws = ours.get("wait_share")
    d12.append(f"| input wait / step | {num(100 * ws, '{:.2f}%') if ws is not None else 'n/a'} | | | < 1% |")
    opk, tpk = ours.get("peak_bytes"), tm.get("peak_like_ours")
    pr = f"{opk / tpk:.2f}x" if opk and tpk else "n/a"
    d12.append(f"| peak memory (cudaMemGetInfo, context incl.) | {gib(opk)} | {gib(tpk)} | {pr} | < torch |")
    pl = ours.get("planned_bytes")
    dev = f"{100 * (opk - pl) / pl:+.1f}%" if pl and opk else "n/a"
    d12.append(f"| d12 plan vs measured peak | {gib(pl)} -> {gib(opk)} | | {dev} | within 5% |")
    lf, ll = ours.get("loss_first"), ours.get("loss_last")
    tl = (tj.get("loss_first"), tj.get("loss_last"))
    d12.append(f"| loss first -> last | {num(lf, '{:.3f}')} -> {num(ll, '{:.3f}')} | "
              f"{num(tl[0], '{:.3f}')} -> {num(tl[1], '{:.3f}')} | | falling |")
    if res.get(("edge", "measured")) or res.get(("edge", "plan")):
        d12.append(cut(f"| memory edge | {res.get(('edge', 'measured'), res.get(('edge', 'plan'), ''))} | | | "
                      f">= 95% planned, within 5%, 0 OOM |", 230))
    if sweep:
        n_oom = sum(1 for _, r in sweep if r.startswith("OOM"))
        n_tr = sum(1 for _, r in sweep if r.startswith("trained"))
        d12.append(f"| sweep | {len(sweep)} configs: {n_tr} trained, {n_oom} OOM | | | 0 OOM |")
    if res.get(("dp", "scaling")):  # run.sh step 8b: tokens/s per GPU, scaling efficiency vs 1 GPU
        d12.append(cut(f"| multi-GPU d12 0.5M tok/step (GPUs: tok/s/GPU, efficiency) | {res[('dp', 'scaling')]} "
                      f"| | | >= 90% at 8 |", 300))
    if res.get(("llama", "ours")) or res.get(("llama", "torch")):  # run.sh step 10b: Llama-shape ~1B bf16
        d12.append(cut(f"| Llama {res.get(('llama', 'params'), '~1B')} bf16 tokens/s (MFU) | "
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
                       "ours": ours, "torch": tj, "torch_mem": tm, "sweep": sweep, "speed": speed,
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
