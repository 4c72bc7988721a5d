#!/usr/bin/env python3
"""train_log_cmp.py A.jsonl B.jsonl TOL [KEY...] - two llmtrain --log files, step by step:
every KEY (default: step loss grad_norm lr val_loss tokens target_tokens) present in both or
neither, finite, and within TOL relative (0: identical). Prints the worst relative difference;
exit 1 on a mismatch. Shared by tests/dist_train.sh and tests/llmtrain_cuda_llama.sh."""
import json
import math
import sys

a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
tol = float(sys.argv[3])
keys = sys.argv[4:] or ["step", "loss", "grad_norm", "lr", "val_loss", "tokens", "target_tokens"]
if len(a) != len(b) or not a:
    print("steps %d vs %d" % (len(a), len(b)))
    sys.exit(1)
worst = 0.0
for x, y in zip(a, b):
    for k in keys:
        if (k in x) != (k in y):
            print("step %s: %s in one log only" % (x["step"], k))
            sys.exit(1)
        if k not in x:
            continue
        if not (math.isfinite(x[k]) and math.isfinite(y[k])):
            print("step %s: %s not finite" % (x["step"], k))
            sys.exit(1)
        if tol == 0 and x[k] != y[k]:
            print("step %s: %s %r != %r" % (x["step"], k, x[k], y[k]))
            sys.exit(1)
        worst = max(worst, abs(x[k] - y[k]) / max(abs(x[k]), 1e-30))
if worst > tol:
    print("worst relative difference %.3g > %g" % (worst, tol))
    sys.exit(1)
print("%d steps, worst relative difference %.3g" % (len(a), worst))
