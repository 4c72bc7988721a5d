#!/usr/bin/env python3
"""Run every ```sh and ```python block of README.md, in order, as a new user would: in one scratch folder laid out
like a checkout (samples/ and ../shared/ reachable as the README writes them), with the project's binaries on PATH.

    readme_examples.py --readme README.md --src SRC --shared SHARED --bin DIR [--bin DIR]... [--python PY]
                       [--only LINE] [--keep] [--verbose] [--require torch]

Blocks run like commands typed into one terminal: each sh block in bash with `set -eo pipefail`, and what it exports
(and where it cds) is what the next block, sh or python, starts with. Python blocks run in the interpreter --python
names (the venv tests/python/run.sh builds, the package installed). Each block has a time limit (--timeout).

A block the test cannot run is marked in the README, on the line just before its fence, with the reason:
    <!-- readme-test: skip (installs system packages) -->
    <!-- readme-test: allow-exit 1 (lint finds warnings: exit 1) -->   commands may also exit with this status
Skipped blocks are counted and printed with their reasons; an unknown marker is an error. Python blocks that use
torch are skipped, with the reason printed, when --python has no torch, unless --require torch (the setup was meant
to install it): then they fail.

Environment of the first block: this process's, with the --bin folders first on PATH, MKS_VOCAB_DIR unset (the
README exports it where a user would), and MKS_CACHE_DIR in the scratch folder (no writes to ~/.cache).
Exit 0 when every runnable block passed, 1 when one failed, 77 when no --python was given (the Python blocks
could not run: no venv) and nothing failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
MARKER_KINDS = re.compile(r"^(skip|allow-exit (\d+))\s+\((.+)\)$")


class Block:
    def __init__(self, lang, line, text, marker):
        self.lang, self.line, self.text, self.marker = lang, line, text, marker
        self.skip = self.allow_exit = None
        if marker is not None:
            m = MARKER_KINDS.match(marker)
            if not m:
                raise SystemExit(f"README.md:{line}: unknown readme-test marker {marker!r} "
                                 "(use 'skip (reason)' or 'allow-exit N (reason)')")
            if m.group(1) == "skip":
                self.skip = m.group(3)
            else:
                self.allow_exit = int(m.group(2))
        self.reason = m.group(3) if marker is not None else None


def blocks_of(path):
    """The README's fenced blocks in order: (language, line of the opening fence, text, marker or None)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j == len(lines):
            raise SystemExit(f"{path}:{start + 1}: fence never closed")
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.match(lines[k]) if k >= 0 else None
        out.append(Block(lang, start + 1, "\n".join(lines[start + 1:j]) + "\n", mk.group(1) if mk else None))
        i = j + 1
    # a marker must sit on a block the test runs: one before a language-less block would be ignored silently
    for b in out:
        if b.marker is not None and b.lang not in ("sh", "python"):
            raise SystemExit(f"{path}:{b.line}: readme-test marker on a ```{b.lang} block (only sh / python run)")
    return [b for b in out if b.lang in ("sh", "python")]


def uses_torch(text):
    return re.search(r"^\s*(import torch|from torch|import mkshards\.torch|from mkshards\.torch)\b", text, re.M)


def read_env(path):
    env = {}
    for item in open(path, "rb").read().split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode("utf-8", "surrogateescape")] = v.decode("utf-8", "surrogateescape")
    return env


def run_block(b, env, cwd, state, python, timeout):
    """Run one block; returns (ok, seconds, output, env after, cwd after)."""
    envf, cwdf = os.path.join(state, "env"), os.path.join(state, "cwd")
    for f in (envf, cwdf):
        if os.path.exists(f):
            os.unlink(f)
    if b.lang == "sh":
        if b.allow_exit is not None:  # no -e: the ERR trap ends the block on any other status
            head = f"set -o pipefail\ntrap 'rc=$?; [ $rc -eq {b.allow_exit} ] || exit $rc' ERR\n"
        else:
            head = "set -eo pipefail\n"
        script = head + b.text + f'\nenv -0 > "{envf}"\npwd > "{cwdf}"\n'
        cmd = ["bash", "-c", script, "readme-block"]
    else:
        # the environment a later block sees is the one this one started with (a Python block exports nothing)
        cmd = [python, "-c", b.text]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
        out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") + f"\n[killed after {timeout} s]"
        rc = -1
    dt = time.monotonic() - t0
    ok = rc == 0
    if ok and b.lang == "sh":
        if not (os.path.exists(envf) and os.path.exists(cwdf)):
            return False, dt, out + "\n[the block ended without reaching its end (exit or exec?)]", env, cwd
        env = read_env(envf)
        cwd = open(cwdf).read().rstrip("\n")
    elif not ok:
        out += f"\n[exit status {rc}]"
    return ok, dt, out, env, cwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", required=True)
    ap.add_argument("--src", required=True, help="the checkout (its samples/ is linked into the scratch folder)")
    ap.add_argument("--shared", required=True, help="the shared data folder, reachable as ../shared")
    ap.add_argument("--bin", action="append", default=[], help="folder put first on PATH (mkshards, llmtrain)")
    ap.add_argument("--python", default="", help="interpreter for the Python blocks (empty: they are skipped)")
    ap.add_argument("--require", action="append", default=[], choices=["torch"],
                    help="fail instead of skipping when this optional module is missing")
    # the 300-step training block takes ~186 s on a quiet 2-core machine: 450 s leaves room for a busy one
    ap.add_argument("--timeout", type=float, default=450, help="seconds per block")
    ap.add_argument("--only", type=int, action="append", default=[], help="run only the block at this line")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--verbose", action="store_true", help="print the output of the blocks that pass too")
    a = ap.parse_args()

    if os.sep in a.python:  # the blocks run in the scratch folder
        a.python = os.path.abspath(a.python)
    blocks = blocks_of(a.readme)
    root = tempfile.mkdtemp(prefix="readme_examples.")
    work, state = os.path.join(root, "repo"), os.path.join(root, ".state")
    os.mkdir(work)
    os.mkdir(state)
    os.symlink(os.path.abspath(os.path.join(a.src, "samples")), os.path.join(work, "samples"))
    os.symlink(os.path.abspath(a.shared), os.path.join(root, "shared"))
    env = dict(os.environ)
    env.pop("MKS_VOCAB_DIR", None)
    env["MKS_CACHE_DIR"] = os.path.join(root, "cache")
    env["PATH"] = os.pathsep.join([os.path.abspath(d) for d in a.bin] + [env.get("PATH", "")])
    env["HOME"] = env.get("HOME") or root
    has_torch = bool(a.python) and subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode == 0

    cwd, ran, skipped, failed, total_t = work, [], [], [], 0.0
    print(f"README examples: {len(blocks)} blocks ({sum(b.lang == 'sh' for b in blocks)} sh, "
          f"{sum(b.lang == 'python' for b in blocks)} python) in {work}")
    for b in blocks:
        where = f"README.md:{b.line} {b.lang}"
        if a.only and b.line not in a.only:
            continue
        why = b.skip
        if why is None and b.lang == "python":
            if not a.python:
                why = "no Python venv with the package (tests/python/run.sh could not make one)"
            elif uses_torch(b.text) and not has_torch:
                if "torch" in a.require:
                    failed.append(where)
                    print(f"FAIL {where}: torch is required (--require torch) but {a.python} cannot import it")
                    continue
                why = f"torch is not installed in {a.python} (pip install torch to run it)"
        if why is not None:
            skipped.append((where, why))
            print(f"skip {where}: {why}")
            continue
        ok, dt, out, env2, cwd2 = run_block(b, env, cwd, state, a.python, a.timeout)
        total_t += dt
        if ok:
            ran.append(where)
            env, cwd = env2, cwd2
            print(f"ok   {where} ({dt:.1f} s)")
            if a.verbose:
                print("".join("    " + l + "\n" for l in out[-6000:].splitlines()))
        else:
            failed.append(where)
            print(f"FAIL {where} ({dt:.1f} s):\n" + "".join("    " + l + "\n" for l in b.text.splitlines()))
            tail = out[-6000:]
            print("  output:\n" + "".join("    " + l + "\n" for l in tail.splitlines()))
    print(f"\nREADME examples: {len(ran)} ran in {total_t:.1f} s, {len(failed)} failed, {len(skipped)} skipped"
          + (":" if skipped else ""))
    for where, why in skipped:
        print(f"  skipped {where}: {why}")
    if a.keep:
        print(f"scratch folder kept: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    if not ran:
        print("no block ran")
        return 1
    return 77 if not a.python else 0


if __name__ == "__main__":
    sys.exit(main())
