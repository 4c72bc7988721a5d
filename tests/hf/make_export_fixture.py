#!/usr/bin/env python3
"""The transformers side of test_hf_export (tests/test_hf_export.c).

    python3 tests/hf/make_export_fixture.py BUILD/tests/test_hf_export
        writes tests/data/hf/export_gpt2.json: transformers' loss on the rows
        test_hf_export uses, for its fp32 and bf16 export, and the ids
        AutoTokenizer gives for its text.
    python3 tests/hf/make_export_fixture.py --check BUILD/tests/test_hf_export
        (ctest hf_export_transformers, labels manual;slow) recomputes them and
        compares with llmtrain's figures and the committed fixture; exit 77
        when torch or transformers is not installed.

Needs: torch (CPU: pip install torch --index-url https://download.pytorch.org/whl/cpu)
and transformers. Everything is loaded offline (local_files_only) from the
folders `test_hf_export dump DIR` exports: AutoModelForCausalLM and
AutoTokenizer get nothing but what llmtrain wrote."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "data", "hf", "export_gpt2.json")


RUN_DOC = ("tests/cli_export.sh's run: mkshards tokenizer train --vocab-size 300 and build -L 33 --val-fraction 0.05 "
           "on samples/tiny.jsonl, llmtrain --model tiny --seq-len 32 --steps 3 --token-budget 256 "
           "--batch-tokens 256 --val-every 3 --val-rows 8 (seed 1337); transformers' mean loss on those 8 "
           "validation rows of the fp32 export")


def run_check(d, mks, llm, dumper, torch, F, AutoModelForCausalLM):
    root = os.path.join(HERE, "..", "..")
    t = os.path.join(d, "run")
    os.makedirs(t)
    sh = lambda *a: subprocess.run(list(a), check=True, stdout=subprocess.DEVNULL)
    sh(mks, "tokenizer", "train", "--vocab-size", "300", "--out", t + "/tok.tiktoken", "-s", "<|endoftext|>", "-q",
       root + "/samples/tiny.jsonl")
    sh(mks, "build", "-t", t + "/tok.tiktoken", "-L", "33", "-o", t + "/shards", "--val-fraction", "0.05", "-q",
       root + "/samples/tiny.jsonl")
    sh(llm, "--data", t + "/shards", "--model", "tiny", "--seq-len", "32", "--steps", "3", "--token-budget", "256",
       "--batch-tokens", "256", "--val-every", "3", "--val-rows", "8", "--ckpt-dir", t + "/ck", "--log",
       t + "/log.jsonl", "--quiet")
    with open(t + "/log.jsonl") as f:
        run_loss = [json.loads(l) for l in f][-1]["val_loss"]
    sh(llm, "export", "--ckpt", t + "/ck", "--out", t + "/hf", "--data", t + "/shards", "--tokenizer",
       t + "/tok.tiktoken")
    sh(dumper, "valrows", t + "/shards", "32", "8", t + "/val.json")
    with open(t + "/val.json") as f:
        v = json.load(f)
    model = AutoModelForCausalLM.from_pretrained(t + "/hf", local_files_only=True, dtype=torch.float32).eval()

    def hf_loss(rows_json):
        with open(rows_json) as f:
            v = json.load(f)
        inputs, targets = torch.tensor(v["inputs"]), torch.tensor(v["targets"])
        with torch.no_grad():
            logits = model(inputs).logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1).item()

    hf = hf_loss(t + "/val.json")
    # --init-from the export: the first step's loss (before its update) is the
    # model's on that step's 8 train rows
    sh(llm, "--data", t + "/shards", "--init-from", t + "/hf", "--seq-len", "32", "--steps", "1", "--token-budget",
       "256", "--batch-tokens", "256", "--log", t + "/init.jsonl", "--quiet")
    with open(t + "/init.jsonl") as f:
        init_loss = json.loads(f.readline())["loss"]
    sh(dumper, "trainrows", t + "/shards", "32", "8", t + "/train.json")
    hf_init = hf_loss(t + "/train.json")
    return run_loss, hf, init_loss, hf_init


def make_tiny(torch, F):
    """A random-init transformers GPT-2 (every parameter perturbed, biases and
    LayerNorm included) saved with save_pretrained in 20 KB shards
    (model.safetensors.index.json): test_hf_export loads it with
    tr_hf_import_weights and compares its loss on ROWS with transformers'."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(30)
    cfg = GPT2Config(vocab_size=96, n_positions=16, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=95, eos_token_id=95)
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    out = os.path.join(HERE, "..", "data", "hf", "gpt2_tiny")
    for f in os.listdir(out) if os.path.isdir(out) else []:
        os.unlink(os.path.join(out, f))
    model.save_pretrained(out, max_shard_size="20KB", safe_serialization=True)
    rows = torch.randint(0, 96, (2, 17), generator=torch.Generator().manual_seed(31))
    with torch.no_grad():
        logits = model(rows[:, :-1]).logits.float()
    loss = F.cross_entropy(logits.reshape(-1, 96), rows[:, 1:].reshape(-1)).item()
    return {"rows": rows.tolist(), "hf_loss": loss, "files": sorted(os.listdir(out))}


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
        print(f"make_export_fixture: {e}: skipped", file=sys.stderr)
        return 77
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([args[0], "dump", d], check=True)
        with open(os.path.join(d, "rows.json")) as f:
            dump = json.load(f)
        rows = torch.tensor(dump["rows"], dtype=torch.long)
        inputs, targets = rows[:, :-1], rows[:, 1:]
        out = {"rows": "test_hf_export's deterministic rows (B=%d, T=%d)" % inputs.shape}
        for kind in ("fp32", "bf16"):
            model = AutoModelForCausalLM.from_pretrained(os.path.join(d, kind), local_files_only=True,
                                                         dtype=torch.float32)
            model.eval()
            with torch.no_grad():
                logits = model(inputs).logits.float()
            assert logits.shape[-1] == 50257, logits.shape
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
            out["hf_loss_" + kind] = loss
            ours = dump["llmtrain_loss_" + kind]
            rel = abs(loss - ours) / abs(loss)
            print(f"{kind}: transformers {loss:.9g}, llmtrain {ours:.9g}, relative difference {rel:.2e}")
            if rel > 1e-4:
                print(f"FAIL: {kind} loss differs by more than 1e-4 relative", file=sys.stderr)
                return 1
        tok = AutoTokenizer.from_pretrained(os.path.join(d, "fp32"), local_files_only=True)
        ids = tok.encode(dump["text"], add_special_tokens=True)
        out["hf_ids"] = ids
        if ids != dump["tk_ids"]:
            print(f"FAIL: AutoTokenizer ids {ids} != tk_encode {dump['tk_ids']}", file=sys.stderr)
            return 1
        # a real run: llmtrain's validation loss against transformers' on
        # the same validation rows of the exported checkpoint
        build = os.path.dirname(os.path.dirname(os.path.abspath(args[0])))
        mks, llm = os.path.join(build, "tools", "mkshards"), os.path.join(build, "tools", "llmtrain", "llmtrain")
        run_loss, hf_run, init_loss, hf_init = run_check(d, mks, llm, args[0], torch, F, AutoModelForCausalLM)
        print(f"--init-from: llmtrain first-step loss {init_loss:.9g}, transformers {hf_init:.9g}, "
              f"relative difference {abs(init_loss - hf_init) / hf_init:.2e}")
        if abs(init_loss - hf_init) > 1e-4 * hf_init:
            print("FAIL: the --init-from run's first loss differs by more than 1e-4 relative", file=sys.stderr)
            return 1
        out["hf_init_first_loss"] = hf_init
        print(f"run: llmtrain val loss {run_loss:.9g}, transformers {hf_run:.9g}, "
              f"relative difference {abs(run_loss - hf_run) / hf_run:.2e}")
        if abs(run_loss - hf_run) > 1e-4 * hf_run:
            print("FAIL: the run's validation loss differs by more than 1e-4 relative", file=sys.stderr)
            return 1
        out["hf_run_val_loss"] = hf_run
        out["run"] = RUN_DOC
        out["versions"] = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    if check:
        with open(FIXTURE) as f:
            fx = json.load(f)
        for k in ("hf_loss_fp32", "hf_loss_bf16", "hf_run_val_loss", "hf_init_first_loss"):
            if abs(fx[k] - out[k]) > 1e-4 * abs(out[k]):
                print(f"FAIL: committed {k} {fx[k]} != recomputed {out[k]}", file=sys.stderr)
                return 1
        if fx["hf_ids"] != out["hf_ids"]:
            print("FAIL: committed hf_ids differ", file=sys.stderr)
            return 1
        print("make_export_fixture: transformers agrees with llmtrain and the committed fixture")
        return 0
    tiny = make_tiny(torch, F)
    out["import_gpt2_tiny"] = tiny
    print(f"gpt2_tiny (save_pretrained, {len(tiny['files'])} files): transformers loss {tiny['hf_loss']:.9g}")
    with open(FIXTURE, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", FIXTURE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
