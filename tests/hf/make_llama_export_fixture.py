#!/usr/bin/env python3
"""The transformers side of the Llama family's `llmtrain export` / `--init-from`
(issue 30 item 3; tests/cli_llmtrain_llama.sh checks the committed figures).

    python3 tests/hf/make_llama_export_fixture.py BUILD/tests/test_hf_export
        runs the tests' Llama run (below), exports it, and writes
        tests/data/hf/export_llama.json: transformers' loss on the run's 8
        validation rows of the fp32 export, and on the first step's 8 train
        rows of an --init-from run from that export.
    python3 tests/hf/make_llama_export_fixture.py --check BUILD/tests/test_hf_export
        (ctest hf_export_llama_transformers, labels manual;slow) recomputes them
        and compares with llmtrain's own figures (1e-4 relative) and the
        committed fixture; exit 77 when torch or transformers is missing.

test_hf_export's `valrows` / `trainrows` give the rows llmtrain evaluates.
Everything loads offline from what llmtrain wrote (AutoModelForCausalLM,
AutoTokenizer)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "data", "hf", "export_llama.json")
RUN_DOC = ("tests/cli_llmtrain_llama.sh's run: mkshards tokenizer train --vocab-size 512 and build -L 33 "
           "--val-fraction 0.05 on samples/tiny.jsonl, llmtrain --model llama-tiny --seq-len 32 --steps 3 "
           "--token-budget 256 --batch-tokens 256 --val-every 3 --val-rows 8 (seed 1337)")


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 64
    try:
        import torch
        import torch.nn.functional as F
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        print(f"make_llama_export_fixture: {e}: skipped", file=sys.stderr)
        return 77
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    dumper = args[0]
    build = os.path.dirname(os.path.dirname(os.path.abspath(dumper)))
    mks, llm = os.path.join(build, "tools", "mkshards"), os.path.join(build, "tools", "llmtrain", "llmtrain")
    root = os.path.join(HERE, "..", "..")
    with tempfile.TemporaryDirectory() as t:
        sh = lambda *a: subprocess.run(list(a), check=True, stdout=subprocess.DEVNULL)
        sh(mks, "tokenizer", "train", "--vocab-size", "512", "--out", t + "/tok.tiktoken", "-s", "<|endoftext|>",
           "-q", root + "/samples/tiny.jsonl")
        sh(mks, "build", "-t", t + "/tok.tiktoken", "-L", "33", "-o", t + "/shards", "--val-fraction", "0.05", "-q",
           root + "/samples/tiny.jsonl")
        sh(llm, "--data", t + "/shards", "--model", "llama-tiny", "--seq-len", "32", "--steps", "3",
           "--token-budget", "256", "--batch-tokens", "256", "--val-every", "3", "--val-rows", "8", "--ckpt-dir",
           t + "/ck", "--log", t + "/log.jsonl", "--quiet")
        with open(t + "/log.jsonl") as f:
            run_loss = [json.loads(l) for l in f][-1]["val_loss"]
        sh(llm, "export", "--ckpt", t + "/ck", "--out", t + "/hf", "--data", t + "/shards", "--tokenizer",
           t + "/tok.tiktoken")
        model = AutoModelForCausalLM.from_pretrained(t + "/hf", local_files_only=True, dtype=torch.float32).eval()
        AutoTokenizer.from_pretrained(t + "/hf", local_files_only=True)

        def hf_loss(kind):
            sh(dumper, kind, t + "/shards", "32", "8", t + "/rows.json")
            with open(t + "/rows.json") as f:
                v = json.load(f)
            inputs, targets = torch.tensor(v["inputs"]), torch.tensor(v["targets"])
            with torch.no_grad():
                logits = model(inputs).logits.float()
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1).item()

        hf_run = hf_loss("valrows")
        sh(llm, "--data", t + "/shards", "--init-from", t + "/hf", "--seq-len", "32", "--steps", "1",
           "--token-budget", "256", "--batch-tokens", "256", "--log", t + "/init.jsonl", "--quiet")
        with open(t + "/init.jsonl") as f:
            init_loss = json.loads(f.readline())["loss"]
        hf_init = hf_loss("trainrows")
    bad = 0
    for what, ours, hf in (("run's validation loss", run_loss, hf_run), ("--init-from first-step loss", init_loss,
                                                                           hf_init)):
        rel = abs(ours - hf) / hf
        print(f"{what}: llmtrain {ours:.9g}, transformers {hf:.9g}, relative difference {rel:.2e}")
        if rel > 1e-4:
            print(f"FAIL: the {what} differs by more than 1e-4 relative", file=sys.stderr)
            bad = 1
    if bad:
        return 1
    out = {"run": RUN_DOC, "hf_run_val_loss": hf_run, "hf_init_first_loss": hf_init,
           "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__}}
    if check:
        with open(FIXTURE) as f:
            fx = json.load(f)
        for k in ("hf_run_val_loss", "hf_init_first_loss"):
            if abs(fx[k] - out[k]) > 1e-4 * abs(out[k]):
                print(f"FAIL: committed {k} {fx[k]} != recomputed {out[k]}", file=sys.stderr)
                return 1
        print("make_llama_export_fixture: transformers agrees with llmtrain and the committed fixture")
        return 0
    with open(FIXTURE, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", FIXTURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
