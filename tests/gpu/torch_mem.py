#!/usr/bin/env python3
"""Runs tools/bench/nanogpt_torch.py unchanged and, when it exits, measures
PyTorch's device memory the way ours is measured (issue 14 item 7): device
memory in use as cudaMemGetInfo sees it, CUDA context included.

    TORCH_MEM_OUT=file.json python3 tests/gpu/torch_mem.py [nanogpt_torch.py args...]

At exit the caching allocator still holds every block it reserved, so
total - free = context + libraries + reserved-now; the peak is that minus
reserved-now plus max_memory_reserved (the allocator's high-water mark).
Ours (llmtrain's "peak_bytes") is total - free after step 1: context +
libraries + the one arena.  Both: context included, like with like."""
import atexit
import json
import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "bench", "nanogpt_torch.py")


def report():
    out = os.environ.get("TORCH_MEM_OUT")
    try:
        import torch
        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            rec = {"error": "CUDA not used"}
        else:
            torch.cuda.synchronize()
            free, total = torch.cuda.mem_get_info()
            reserved = torch.cuda.memory_reserved()
            rec = {"used_at_exit": total - free, "reserved_at_exit": reserved,
                   "max_reserved": torch.cuda.max_memory_reserved(),
                   "max_allocated": torch.cuda.max_memory_allocated(), "total": total}
            rec["peak_like_ours"] = rec["used_at_exit"] - reserved + rec["max_reserved"]
    except Exception as e:  # noqa: BLE001 - report, never mask the run's own status
        rec = {"error": f"{type(e).__name__}: {e}"}
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(rec, f)
            f.write("\n")


atexit.register(report)
sys.argv = [SCRIPT] + sys.argv[1:]
sys.path.insert(0, os.path.dirname(SCRIPT))
runpy.run_path(SCRIPT, run_name="__main__")
