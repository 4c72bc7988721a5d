#!/usr/bin/env bash
# dist_plan.sh LLMTRAIN - the per-rank memory plan of data-parallel runs
# (--plan --world N --zero 0|1): on the GPU the AdamW state (and the master
# weights in mixed precision) 8 (4) x ceil(P/N) bytes with ZeRO-1, on the CPU
# 8 x the largest shard of whole gradient-norm parts (train/dist.c); the
# all-reduce bucket counted once world > 1; a micro-batch never longer than
# the rank's share ceil(R/N) of the step's rows; --world 1 == no --world.
set -euo pipefail
L=$1
j() { "$L" --plan --json "$@"; }
python3 - "$(j --model tiny --seq-len 64 --batch-tokens 1024 --vocab-size 1000)" \
    "$(j --model tiny --seq-len 64 --batch-tokens 1024 --vocab-size 1000 --world 1)" \
    "$(j --model tiny --seq-len 64 --batch-tokens 1024 --vocab-size 1000 --world 4)" \
    "$(j --model tiny --seq-len 64 --batch-tokens 1024 --vocab-size 1000 --world 3 --zero 1)" \
    "$(j --model d12 --seq-len 1024 --token-budget 16384 --batch-tokens 524288 --device cuda --precision bf16 --mem-budget 140GiB --world 8 --zero 1)" \
    "$(j --model d12 --seq-len 1024 --token-budget 16384 --batch-tokens 524288 --device cuda --precision bf16 --mem-budget 140GiB)" <<'PY'
import json, sys
one, w1, w4, z3, g8, g1 = (json.loads(a) for a in sys.argv[1:])
it = lambda d: {i["name"]: i["bytes"] for i in d["items"]}
P = one["params"]
fail = 0
def check(c, what):
    global fail
    print(("ok   " if c else "FAIL ") + what)
    fail |= not c
check(one == w1, "--world 1 is the plan without --world")
check(w4["micro_rows"] == 4 and w4["n_micro"] == 4 and w4["rank_micro"] == 1,
      "world 4: 16 rows per step -> 4 rows per rank (%d rows, %d micro-batches)" % (w4["micro_rows"], w4["n_micro"]))
check(it(w4)["AdamW m+v (fp32)"] == 8 * P and it(w4)["communication buffer (all-reduce bucket)"] == 4 << 20,
      "world 4 without ZeRO: full AdamW state + 4 MiB bucket")
za = [b for n, b in it(z3).items() if n.startswith("AdamW")]
def zshard(P, W):  # train/dist.c: whole parts of 256, the largest rank's
    unit = -(-P // 256); U = -(-P // unit)
    return max(min(U * (r + 1) // W * unit, P) - min(U * r // W * unit, P) for r in range(W))
check(za == [8 * zshard(P, 3)] and zshard(P, 3) < P // 2,
      "CPU ZeRO-1 over 3: AdamW m+v = 8 x the largest shard (%d of %d elements)" % (zshard(P, 3), P))
check(z3["total_bytes"] < one["total_bytes"] - 4 * P, "CPU ZeRO-1 over 3: per-rank plan smaller by > 4P bytes")
gi, g1i = it(g8), it(g1)
P = g8["params"]
check(gi["AdamW m+v (fp32, 1/N shard: ZeRO-1)"] == 8 * (-(-P // 8)) and
      gi["master weights (fp32, 1/N shard: ZeRO-1)"] == 4 * (-(-P // 8)), "GPU ZeRO-1 over 8: AdamW + master shards")
check(gi["gradients (fp32)"] == 4 * 8 * (-(-P // 8)), "GPU gradients padded to 8 equal shards")
check(g8["total_bytes"] < g1["total_bytes"], "GPU per-rank plan smaller with ZeRO-1 (%.2f vs %.2f GiB)" %
      (g8["total_bytes"] / 2**30, g1["total_bytes"] / 2**30))
sys.exit(fail)
PY
