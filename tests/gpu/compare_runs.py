#!/usr/bin/env python3
"""Two llmtrain JSONL logs of the same run with different switches, compared (tests/gpu/run.sh).

    compare_runs.py equal A.jsonl B.jsonl N
        steps 1..N: loss and grad norm must be the SAME values (switches that are bit-identical by
        construction: CUDA graphs, the multi-tensor AdamW); prints "equal: ..." or "DIFFER at step ...",
        with B's tokens/s against A's.
    compare_runs.py close A.jsonl B.jsonl N [TORCH.json]
        steps 1..N: B's loss within 2% of A's at every step (other kernels, e.g. cuDNN's attention: not
        the same bits); prints "close: ..." or "DIFFER: ...", tokens/s against A's and PyTorch's line.

tokens/s: the median of the steps after the first quarter (warm-up excluded). Exit 0 either way: the
first word is the verdict run.sh reads."""
import json
import statistics
import sys


def rows(path):
    out = {}
    try:
        for line in open(path):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if "step" in j:
                out[j["step"]] = j
    except OSError:
        pass
    return out


def tps(r):
    v = [r[s]["tok_per_s"] for s in sorted(r)[len(r) // 4:] if isinstance(r[s].get("tok_per_s"), (int, float))]
    return statistics.median(v) if v else 0.0


def torch_tps(path):
    try:
        t = json.loads(open(path).read().strip().splitlines()[-1])
        return float(t.get("tokens_per_s") or t.get("tok_per_s") or 0)
    except (OSError, ValueError, IndexError, AttributeError, TypeError):
        return 0.0


def equal(a, b, n):
    bad = [s for s in range(1, n + 1) if s not in a or s not in b or
           (a[s].get("loss"), a[s].get("grad_norm")) != (b[s].get("loss"), b[s].get("grad_norm"))]
    ta, tb = tps(a), tps(b)
    r = f"{tb / ta:.3f}x" if ta and tb else "n/a"
    if bad:
        s = bad[0]
        pa = (a[s].get("loss"), a[s].get("grad_norm")) if s in a else None
        pb = (b[s].get("loss"), b[s].get("grad_norm")) if s in b else None
        return f"DIFFER at step {s}: eager {pa} vs switched {pb} ({len(bad)} of {n} steps differ)"
    return f"equal: {n} steps, loss + grad norm; {tb:.0f} vs eager {ta:.0f} tok/s ({r})"


def close(a, b, n, torch_json):
    steps = [s for s in range(1, n + 1) if s in a and s in b and a[s].get("loss") and b[s].get("loss") is not None]
    worst = max((abs(b[s]["loss"] - a[s]["loss"]) / abs(a[s]["loss"]) for s in steps), default=None)
    ta, tb = tps(a), tps(b)
    t = torch_tps(torch_json) if torch_json else 0.0
    vs = f", {tb / t:.3f}x PyTorch's {t:.0f}" if t and tb else ""
    ok = len(steps) == n and worst is not None and worst <= 0.02
    w = f"{worst:.2e}" if worst is not None else "n/a"
    return (f"{'close' if ok else 'DIFFER'}: {len(steps)} of {n} steps, worst loss difference {w}; "
            f"{tb:.0f} vs {ta:.0f} tok/s ({tb / ta if ta else 0:.3f}x){vs}")


def main(argv):
    if len(argv) < 4 or argv[0] not in ("equal", "close"):
        print(__doc__, file=sys.stderr)
        return 2
    a, b, n = rows(argv[1]), rows(argv[2]), int(argv[3])
    print(equal(a, b, n) if argv[0] == "equal" else close(a, b, n, argv[4] if len(argv) > 4 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
